-- Adds slice deltas to counter hashes and registers the counters, all or
-- nothing. Used by both key layouts.
--
-- KEYS: every key the write touches; ARGV refers to them by index.
-- ARGV[1]  index of the writer lane's record key, or 0 for none
-- ARGV[2]  the write's sequence number in its lane
-- ARGV[3]  n, the number of HINCRBY operations
-- ARGV[4 .. 3+3n]  n triples: hash key index, field (slice start), delta
-- then registry groups to the end: registry key index, m, then m members
--
-- Returns 1 when written, 0 when the lane's record already holds this
-- sequence number or a later one (a replayed write: nothing is added). The
-- record is set to the number, with a 7-day expiry, only when the write
-- succeeds. If an HINCRBY fails (overflow, wrong type), every delta already
-- added is taken back and the error "TALLY_OVERFLOW <op>" or
-- "TALLY_FAILED <op> <message>" is returned.
local marker = tonumber(ARGV[1])
local seq = tonumber(ARGV[2])
if marker > 0 then
  local last = tonumber(redis.call('GET', KEYS[marker]) or '0')
  if seq <= last then
    return 0
  end
end

local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  local at = 4 + 3 * i
  local r = redis.pcall('HINCRBY', KEYS[tonumber(ARGV[at])], ARGV[at + 1], ARGV[at + 2])
  if type(r) == 'table' and r.err then
    for j = i - 1, 0, -1 do
      local back = 4 + 3 * j
      local key, field, delta = KEYS[tonumber(ARGV[back])], ARGV[back + 1], ARGV[back + 2]
      local left
      if delta == '0' then
        left = tonumber(redis.call('HGET', key, field))
      elseif string.sub(delta, 1, 1) == '-' then
        left = redis.call('HINCRBY', key, field, string.sub(delta, 2))
      else
        left = redis.call('HINCRBY', key, field, '-' .. delta)
      end
      -- The field held 0 or did not exist before: it most likely did not.
      if left == 0 then
        redis.call('HDEL', key, field)
      end
    end
    if string.find(r.err, 'overflow', 1, true) then
      return redis.error_reply('TALLY_OVERFLOW ' .. i)
    end
    return redis.error_reply('TALLY_FAILED ' .. i .. ' ' .. r.err)
  end
end

local at = 4 + 3 * n
while at <= #ARGV do
  local key = KEYS[tonumber(ARGV[at])]
  local m = tonumber(ARGV[at + 1])
  local args = {}
  for k = 1, m do
    args[#args + 1] = 0
    args[#args + 1] = ARGV[at + 1 + k]
    if #args == 1000 or k == m then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  at = at + 2 + m
end
if marker > 0 then
  redis.call('SET', KEYS[marker], ARGV[2], 'EX', 604800)
end
return 1

-- Adds slice deltas to counter hashes and registers the counters, all or
-- nothing. Used by both key layouts.
--
-- KEYS: every key the write touches; ARGV refers to them by index.
-- ARGV[1]  index of the write-id set (a sorted set of recent write ids,
--          scored by when they may be forgotten), or 0 for no write id
-- ARGV[2]  the write id; ARGV[3] now (Unix seconds); ARGV[4] when this id
--          may be forgotten
-- ARGV[5]  n, the number of HINCRBY operations
-- ARGV[6 .. 5+3n]  n triples: hash key index, field (slice start), delta
-- then registry groups to the end: registry key index, m, then m members
--
-- Returns 1 when written, 0 when the id was already recorded (a replayed
-- write: nothing is added). The write ids live in one sorted set per
-- registry shard rather than a key each, so the set of keys a write touches
-- stays the same from write to write (a write can run while its slot is
-- being migrated, once its keys are all on one side) and forgotten ids are
-- trimmed here, by score. If an HINCRBY fails (overflow, wrong type), every
-- delta already added is taken back, the marker is removed, and the error
-- "TALLY_OVERFLOW <op>" or "TALLY_FAILED <op> <message>" is returned.
local marker = tonumber(ARGV[1])
if marker > 0 then
  local seen = redis.call('ZSCORE', KEYS[marker], ARGV[2])
  if seen and tonumber(seen) > tonumber(ARGV[3]) then
    return 0
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[marker], '-inf', ARGV[3])
  redis.call('ZADD', KEYS[marker], ARGV[4], ARGV[2])
end

local n = tonumber(ARGV[5])
for i = 0, n - 1 do
  local at = 6 + 3 * i
  local r = redis.pcall('HINCRBY', KEYS[tonumber(ARGV[at])], ARGV[at + 1], ARGV[at + 2])
  if type(r) == 'table' and r.err then
    for j = i - 1, 0, -1 do
      local back = 6 + 3 * j
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
    if marker > 0 then
      redis.call('ZREM', KEYS[marker], ARGV[2])
    end
    if string.find(r.err, 'overflow', 1, true) then
      return redis.error_reply('TALLY_OVERFLOW ' .. i)
    end
    return redis.error_reply('TALLY_FAILED ' .. i .. ' ' .. r.err)
  end
end

local at = 6 + 3 * n
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
return 1

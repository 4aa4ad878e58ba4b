-- Adds slice deltas to counter hashes and registers the counters, all or
-- nothing. Used by both key layouts.
--
-- KEYS: the writer lane's record (when ARGV[1] is '1'), then the h counter
-- hashes, then the registries, each in the order ARGV lists them.
-- ARGV[1]  '1' when KEYS[1] is the writer lane's record, else '0'
-- ARGV[2]  the write's sequence number in its lane
-- ARGV[3]  h, the number of hashes
-- then per hash: m, then m pairs of field (slice start) and delta;
-- then per registry to the end: m, then m members.
--
-- The layout lets the hot loop read each hash's key once and parse no
-- number but the counts (usually '1'), which matters at a million HINCRBY
-- a second. Operations are numbered from 0 in ARGV order.
--
-- Returns 1 when written, 0 when the lane's record already holds this
-- sequence number or a later one (a replayed write: nothing is added). The
-- record is set to the number, with a 7-day expiry, only when the write
-- succeeds. If an HINCRBY fails (overflow, wrong type), every delta already
-- added is taken back and the error "TALLY_OVERFLOW <op>" or
-- "TALLY_FAILED <op> <message>" is returned.
local marker = ARGV[1] == '1' and 1 or 0
if marker == 1 then
  local last = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tonumber(ARGV[2]) <= last then
    return 0
  end
end

local function count(s)
  if s == '1' then return 1 end
  return tonumber(s)
end

-- Takes back the first `upto` operations (0-based, exclusive).
local function undo(upto)
  local at, op = 4, 0
  for k = 1, tonumber(ARGV[3]) do
    local key = KEYS[marker + k]
    local m = count(ARGV[at])
    at = at + 1
    for _ = 1, m do
      if op >= upto then return end
      take_back(key, ARGV[at], ARGV[at + 1])
      at = at + 2
      op = op + 1
    end
  end
end

local h = tonumber(ARGV[3])
local at, op = 4, 0
for k = 1, h do
  local key = KEYS[marker + k]
  local m = count(ARGV[at])
  at = at + 1
  for _ = 1, m do
    local r = redis.pcall('HINCRBY', key, ARGV[at], ARGV[at + 1])
    if type(r) == 'table' and r.err then
      undo(op)
      if string.find(r.err, 'overflow', 1, true) then
        return redis.error_reply('TALLY_OVERFLOW ' .. op)
      end
      return redis.error_reply('TALLY_FAILED ' .. op .. ' ' .. r.err)
    end
    at = at + 2
    op = op + 1
  end
end

local reg = marker + h
while at <= #ARGV do
  reg = reg + 1
  local key = KEYS[reg]
  local m = tonumber(ARGV[at])
  local args = {}
  for k = 1, m do
    args[#args + 1] = '0'
    args[#args + 1] = ARGV[at + k]
    if #args == 1000 or k == m then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  at = at + 1 + m
end
if marker == 1 then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', 604800)
end
return 1

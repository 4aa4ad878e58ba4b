-- Merges slice deltas of one space into its series' hashes and registers
-- the series, all or nothing. Every space and both key layouts use it.
--
-- KEYS: the writer lane's record (when ARGV[1] is '1'), then the h series
-- hashes (one per series and resolution), then the registries, each in the
-- order ARGV lists them.
-- ARGV[1]  '1' when KEYS[1] is the writer lane's record, else '0'
-- ARGV[2]  the write's sequence number in its lane
-- ARGV[3]  the space's kind code: '1' for sums, else a key of KIND_MERGE
-- ARGV[4]  h, the number of hashes
-- then per hash: m, then m pairs of field (slice start) and delta;
-- then per registry to the end: m, then m members.
--
-- Sums keep the tight loop counters always had: each hash's key is read
-- once and no number is parsed but the counts (usually '1'), which matters
-- at a million HINCRBY a second. Blob kinds read each field (HGET), merge
-- with their kind's function (prepended: engine_kinds.lua) and write it
-- back (HSET). Operations are numbered from 0 in ARGV order.
--
-- Returns 1 when written, 0 when the lane's record already holds this
-- sequence number or a later one (a replayed write: nothing is merged).
-- The record is set to the number, with a 7-day expiry, only when the
-- write succeeds. If a merge fails (overflow, wrong type, a blob of another
-- kind), every merge already done is taken back (sums by subtraction,
-- blobs by restoring the value they held) and the error
-- "TALLY_OVERFLOW <op> ..." or "TALLY_FAILED <op> <message>" is returned.
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

local h = tonumber(ARGV[4])
local merge = nil
if ARGV[3] ~= '1' then
  merge = KIND_MERGE[tonumber(ARGV[3])]
  if not merge then
    return redis.error_reply('TALLY_FAILED 0 no merge function for kind ' .. ARGV[3])
  end
end

-- The first operation that failed (0-based) and its error. No closure or
-- table is made on the way for sums: this runs for every exact increment.
local failed, err = nil, nil
-- Blob kinds: the value each operation found (false: none), to restore.
local saved = nil
local at, op = 5, 0
if not merge then
  for k = 1, h do
    local key = KEYS[marker + k]
    local m = count(ARGV[at])
    at = at + 1
    for _ = 1, m do
      local r = redis.pcall('HINCRBY', key, ARGV[at], ARGV[at + 1])
      if type(r) == 'table' and r.err then
        failed, err = op, r.err
        break
      end
      at = at + 2
      op = op + 1
    end
    if failed then break end
  end
else
  saved = {}
  for k = 1, h do
    local key = KEYS[marker + k]
    local m = count(ARGV[at])
    at = at + 1
    for _ = 1, m do
      local old = redis.pcall('HGET', key, ARGV[at])
      local new = old
      if not (type(old) == 'table' and old.err) then
        new = merge(old, ARGV[at + 1])
      end
      if type(new) == 'table' and new.err then
        failed, err = op, new.err
        break
      end
      saved[op + 1] = old
      redis.call('HSET', key, ARGV[at], new)
      at = at + 2
      op = op + 1
    end
    if failed then break end
  end
end

if failed then
  -- Take back the operations before the failed one: sums by subtraction,
  -- blobs by restoring what they held.
  local at, op = 5, 0
  for k = 1, h do
    local key = KEYS[marker + k]
    local m = count(ARGV[at])
    at = at + 1
    for _ = 1, m do
      if op >= failed then break end
      if not merge then
        take_back(key, ARGV[at], ARGV[at + 1])
      elseif saved[op + 1] then
        redis.call('HSET', key, ARGV[at], saved[op + 1])
      else
        redis.call('HDEL', key, ARGV[at])
      end
      at = at + 2
      op = op + 1
    end
    if op >= failed then break end
  end
  if not merge then
    if string.find(err, 'overflow', 1, true) then
      return redis.error_reply('TALLY_OVERFLOW ' .. failed)
    end
    return redis.error_reply('TALLY_FAILED ' .. failed .. ' ' .. err)
  end
  local code, rest = string.match(err, '^(%S+)%s*(.*)$')
  if code == 'TALLY_OVERFLOW' or code == 'TALLY_FAILED' then
    return redis.error_reply(code .. ' ' .. failed .. ' ' .. rest)
  end
  return redis.error_reply('TALLY_FAILED ' .. failed .. ' ' .. err)
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

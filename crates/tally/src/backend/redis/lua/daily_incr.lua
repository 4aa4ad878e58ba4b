-- Counts views of one entity: the day, the running total, and retention,
-- atomically (seed 004's layout, plus a running total).
--
-- KEYS[1]: {<prefix>:<id>}:views  hash YYYYMMDD -> views (the seed's key)
-- KEYS[2]: {<prefix>:<id>}:stats  hash: total (all-time), first (the oldest
--          YYYYMMDD that may be stored in KEYS[1])
-- ARGV[1]  the day, YYYYMMDD
-- ARGV[2]  views to add (>= 1)
-- ARGV[3]  the oldest day kept, YYYYMMDD: older fields are dropped here, and
--          views dated before it only count toward the total
-- ARGV[4]  Unix seconds at which KEYS[1] may expire (only ever extended)
--
-- Dropping old days costs one HKEYS of at most retention + 1 fields, done
-- at most once per entity per day (when `first` falls behind the window):
-- no scan over entities, no cleaner. Returns {day count, total}; on
-- overflow nothing is written and the error is "TALLY_OVERFLOW <what>".
local day, floor = tonumber(ARGV[1]), tonumber(ARGV[3])
local total = redis.pcall('HINCRBY', KEYS[2], 'total', ARGV[2])
if type(total) == 'table' and total.err then
  return redis.error_reply('TALLY_OVERFLOW total')
end
local count = 0
if day >= floor then
  count = redis.pcall('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
  if type(count) == 'table' and count.err then
    redis.call('HINCRBY', KEYS[2], 'total', '-' .. ARGV[2])
    return redis.error_reply('TALLY_OVERFLOW day')
  end
  local expire = tonumber(ARGV[4])
  local current = redis.call('EXPIRETIME', KEYS[1])
  if current < expire then
    redis.call('EXPIREAT', KEYS[1], expire)
  end
end
local first = tonumber(redis.call('HGET', KEYS[2], 'first') or '0')
if first > 0 and first < floor then
  -- Drop the days that left the window; find the oldest that stays.
  local old, oldest = {}, 0
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    local d = tonumber(f)
    if d and d < floor then
      old[#old + 1] = f
    elseif d and (oldest == 0 or d < oldest) then
      oldest = d
    end
  end
  for i = 1, #old, 1000 do
    redis.call('HDEL', KEYS[1], unpack(old, i, math.min(i + 999, #old)))
  end
  first = oldest
end
if day >= floor and (first == 0 or day < first) then
  first = day
end
if first > 0 then
  redis.call('HSET', KEYS[2], 'first', first)
else
  redis.call('HDEL', KEYS[2], 'first')
end
return {count, total}

-- Counts items in one (model, virtual shard)'s most-frequent summaries
-- (Space-Saving on a sorted set), with each bucket's expiry, atomically.
--
-- KEYS: `{<prefix>:ts:<model>:<vshard>}:f:<rollup>:<bucket>:<key>`
-- ARGV[1]  capacity (items kept per summary); ARGV[2] n; then per op:
--          key index, EXPIREAT, m, then m pairs: item, count
--
-- An item already held gains its count; a new item is added while there is
-- room; when full, the lowest item (ZRANGE 0 0: lowest score, ties by the
-- smallest member) is replaced by the new one at that score plus its count.
local cap = tonumber(ARGV[1])
local function add(key, item, count)
  if redis.call('ZSCORE', key, item) then
    redis.call('ZINCRBY', key, count, item)
  elseif redis.call('ZCARD', key) < cap then
    redis.call('ZADD', key, count, item)
  else
    local low = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    redis.call('ZREM', key, low[1])
    redis.call('ZADD', key, tonumber(low[2]) + tonumber(count), item)
  end
end
local n = tonumber(ARGV[2])
local at = 3
for _ = 1, n do
  local key, expire, m = KEYS[tonumber(ARGV[at])], ARGV[at + 1], tonumber(ARGV[at + 2])
  for j = 0, m - 1 do
    add(key, ARGV[at + 3 + 2 * j], ARGV[at + 4 + 2 * j])
  end
  redis.call('EXPIREAT', key, expire)
  at = at + 3 + 2 * m
end
return 1

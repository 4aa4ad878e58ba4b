-- The most-frequent kind's Space-Saving step on a sorted set (the Rust
-- `engine::kinds::top::Summary::add`, the same rule): prepended to the
-- scripts that fold item counts into a summary (ts_ops.lua, for
-- ts_add.lua and ts_merge_give.lua).
--
-- An item already held gains its count; a new item is added while the
-- summary holds fewer than `cap` items; when full, the lowest item (ZRANGE
-- 0 0: lowest score, ties by the smallest member) is replaced by the new
-- one at that score plus its count.
local function top_add(key, item, count, cap)
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

-- Folds the pairs of ARGV from ARGV[at] into `key`: ARGV[at] = m, then m
-- pairs item, count (the op format of every script that writes
-- summaries). Returns the index after the last pair.
local function top_add_pairs(key, at, cap)
  local m = tonumber(ARGV[at])
  for j = 0, m - 1 do
    top_add(key, ARGV[at + 1 + 2 * j], ARGV[at + 2 + 2 * j], cap)
  end
  return at + 1 + 2 * m
end

-- Counts items in one (model, virtual shard)'s most-frequent summaries
-- (Space-Saving on a sorted set), with each bucket's expiry, atomically.
--
-- KEYS: `{<prefix>:ts:<model>:<vshard>}:f:<rollup>:<bucket>:<key>`
-- ARGV[1]  capacity (items kept per summary); ARGV[2] n; then per op:
--          key index, EXPIREAT, m, then m pairs: item, count
-- Each item goes through `top_add` (kind_top.lua, prepended): Space-Saving.
local cap = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local at = 3
for _ = 1, n do
  local key, expire, m = KEYS[tonumber(ARGV[at])], ARGV[at + 1], tonumber(ARGV[at + 2])
  for j = 0, m - 1 do
    top_add(key, ARGV[at + 3 + 2 * j], ARGV[at + 4 + 2 * j], cap)
  end
  redis.call('EXPIREAT', key, expire)
  at = at + 3 + 2 * m
end
return 1

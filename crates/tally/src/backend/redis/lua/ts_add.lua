-- Merges deltas into one (model, virtual shard)'s buckets, each with its
-- bucket's expiry, all or nothing: the one write script of every kind the
-- time-series store keeps, in Sentry's layout.
--
-- KEYS: count hashes `{<prefix>:ts:<model>:<vshard>}:c:<rollup>:<bucket>`,
--       HyperLogLogs `<tag>:d:<rollup>:<bucket>:<key>` and most-frequent
--       summaries `<tag>:f:<rollup>:<bucket>:<key>` (sorted sets)
-- ARGV[1]  capacity (items kept per summary); ARGV[2] n; then n ops, sums
--          first, each: kind code (`Kind::code`), key index, EXPIREAT
--          (bucket start + rollup × samples), then
--          1 (sum):      field (the key), delta            HINCRBY
--          2 (distinct): m, then m values                  PFADD
--          3 (top):      m, then m pairs item, count       top_add
--                        (kind_top.lua, prepended: Space-Saving)
-- If an HINCRBY fails (overflow), the sums already added are taken back
-- (sums come first, so nothing else was written) and the error
-- "TALLY_OVERFLOW <op>" is returned (op counted from 0). Returns 1.
local cap = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local sums = {}
local at = 3
for i = 0, n - 1 do
  local kind, key, expire = ARGV[at], KEYS[tonumber(ARGV[at + 1])], ARGV[at + 2]
  if kind == '1' then
    local field, delta = ARGV[at + 3], ARGV[at + 4]
    local r = redis.pcall('HINCRBY', key, field, delta)
    if type(r) == 'table' and r.err then
      for j = #sums, 1, -1 do
        local s = sums[j]
        if redis.call('HINCRBY', s[1], s[2], '-' .. s[3]) == 0 then
          redis.call('HDEL', s[1], s[2])
        end
      end
      return redis.error_reply('TALLY_OVERFLOW ' .. i)
    end
    sums[#sums + 1] = {key, field, delta}
    at = at + 5
  elseif kind == '2' then
    local m = tonumber(ARGV[at + 3])
    for j = 0, m - 1, 1000 do
      redis.call('PFADD', key, unpack(ARGV, at + 4 + j, at + 3 + math.min(j + 1000, m)))
    end
    at = at + 4 + m
  else
    at = top_add_pairs(key, at + 3, cap)
  end
  redis.call('EXPIREAT', key, expire)
end
return 1

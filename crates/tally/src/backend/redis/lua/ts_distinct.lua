-- Records distinct values in one (model, virtual shard)'s HyperLogLogs,
-- with each bucket's expiry, atomically.
--
-- KEYS: `{<prefix>:ts:<model>:<vshard>}:d:<rollup>:<bucket>:<key>`
-- ARGV[1]  n; then per op: key index, EXPIREAT, m, then m values
local n = tonumber(ARGV[1])
local at = 2
for _ = 1, n do
  local key, expire, m = KEYS[tonumber(ARGV[at])], ARGV[at + 1], tonumber(ARGV[at + 2])
  for j = 0, m - 1, 1000 do
    redis.call('PFADD', key, unpack(ARGV, at + 3 + j, at + 2 + math.min(j + 1000, m)))
  end
  redis.call('EXPIREAT', key, expire)
  at = at + 3 + m
end
return 1

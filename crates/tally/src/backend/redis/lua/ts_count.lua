-- Adds counts to one (model, virtual shard)'s bucket hashes, with each
-- bucket's expiry, all or nothing.
--
-- KEYS: bucket hashes `{<prefix>:ts:<model>:<vshard>}:c:<rollup>:<bucket>`
-- ARGV[1]  n; then n quadruples: hash index, field (the key), delta,
--          EXPIREAT (bucket start + rollup × samples)
-- If an HINCRBY fails (overflow), the deltas already added are taken back
-- and the error "TALLY_OVERFLOW <op>" is returned. Returns 1.
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local at = 2 + 4 * i
  local key = KEYS[tonumber(ARGV[at])]
  local r = redis.pcall('HINCRBY', key, ARGV[at + 1], ARGV[at + 2])
  if type(r) == 'table' and r.err then
    for j = i - 1, 0, -1 do
      local b = 2 + 4 * j
      local k = KEYS[tonumber(ARGV[b])]
      if redis.call('HINCRBY', k, ARGV[b + 1], '-' .. ARGV[b + 2]) == 0 then
        redis.call('HDEL', k, ARGV[b + 1])
      end
    end
    return redis.error_reply('TALLY_OVERFLOW ' .. i)
  end
  redis.call('EXPIREAT', key, ARGV[at + 3])
end
return 1

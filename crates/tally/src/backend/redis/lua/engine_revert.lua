-- Takes back one registry shard's part of a batch that failed elsewhere on
-- a cluster (a batch spanning shards is one call per shard; when one call
-- fails, the calls that succeeded are reverted so the batch as a whole is
-- all or nothing). Tagged layouts, sums only (kinds whose merge subtraction
-- undoes).
--
-- KEYS[1]: the shard's registry; KEYS[2..]: the hashes.
-- ARGV[1]  n, the number of deltas to take back
-- ARGV[2 .. 1+3n]  n triples: hash key index, field (slice start), delta
-- then per counter to the end: its name, k, and the k indices of its hashes;
-- a counter whose hashes are all empty afterwards leaves the registry.
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local at = 2 + 3 * i
  take_back(KEYS[tonumber(ARGV[at])], ARGV[at + 1], ARGV[at + 2])
end
local at = 2 + 3 * n
while at <= #ARGV do
  local name, k = ARGV[at], tonumber(ARGV[at + 1])
  local empty = true
  for j = 1, k do
    if redis.call('EXISTS', KEYS[tonumber(ARGV[at + 1 + j])]) == 1 then
      empty = false
    end
  end
  if empty then
    redis.call('ZREM', KEYS[1], name)
  end
  at = at + 2 + k
end
return 1

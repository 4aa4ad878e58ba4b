-- Takes back one registry shard's part of a batch that failed elsewhere on
-- a cluster (a batch spanning shards is one call per shard; when one call
-- fails, the calls that succeeded are reverted so the batch as a whole is
-- all or nothing). Tagged layouts, sums only (kinds whose merge subtraction
-- undoes).
--
-- KEYS[1]: the shard's registry; in the expiring layout KEYS[2] is its
-- `ends@e`; then the hashes.
-- ARGV[1]  '0', or in the expiring layout the scale of its end scores
-- ARGV[2]  n, the number of deltas to take back
-- ARGV[3 .. 2+3n]  n triples: hash key index, field (slice start, or the
--                  compact layout's integer field), delta
-- then per counter to the end: its name, k, and the k indices of its hashes;
-- a counter whose hashes are all empty afterwards leaves the registry. In
-- the expiring layout every such counter's end score loses its mark (its
-- chunks may have gone with what was taken back, so its next write sets
-- their expiry again), and one left with no data leaves `ends@e` too.
local scale = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
for i = 0, n - 1 do
  local at = 3 + 3 * i
  take_back(KEYS[tonumber(ARGV[at])], ARGV[at + 1], ARGV[at + 2])
end
local at = 3 + 3 * n
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
  if scale > 0 then
    local old = redis.call('ZSCORE', KEYS[2], name)
    if empty then
      redis.call('ZREM', KEYS[2], name)
    elseif old then
      local score = math.floor(tonumber(old) / scale) * scale + scale - 1
      redis.call('ZADD', KEYS[2], string.format('%.0f', score), name)
    end
  end
  at = at + 2 + k
end
return 1

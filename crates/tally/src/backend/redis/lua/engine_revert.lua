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
-- then p, the number of counters written through their pending slices
-- (stats_fold.lua), and per such counter: its pending slice's key index,
-- the delta, its finest cell as `<precision>:<field>`, c, and c pairs of
-- hash key index and field (one per precision, finest first). The delta is
-- taken from the pending slice while it still holds that finest cell, else
-- (folded since) from every precision's field; a pending slice left at 0
-- goes, as a field does.
-- then per counter to the end: its name, k, and the k indices of its hashes
-- (and of its pending slice);
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
local p = tonumber(ARGV[at])
at = at + 1
for _ = 1, p do
  local pend, delta, head, c = KEYS[tonumber(ARGV[at])], ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3])
  local cur = redis.call('HMGET', pend, 's', 't')
  local t = cur[2] or ''
  local s = string.match(head, ':(%d+)$')
  if delta == '0' then
    -- Nothing to take back.
  elseif cur[1] == s and (t == head or string.sub(t, 1, #head + 1) == head .. ' ') then
    local left = redis.call('HINCRBY', pend, 'b', string.sub(delta, 1, 1) == '-' and string.sub(delta, 2) or '-' .. delta)
    if left == 0 then
      redis.call('DEL', pend)
    end
  else
    for j = 0, c - 1 do
      take_back(KEYS[tonumber(ARGV[at + 4 + 2 * j])], ARGV[at + 5 + 2 * j], delta)
    end
  end
  at = at + 4 + 2 * c
end
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

-- Deletes keys of one (model, virtual shard) atomically.
--
-- KEYS[1..nc]: bucket count hashes; KEYS[nc+1..]: distinct and frequency
-- keys of the deleted keys.
-- ARGV[1]  nc; ARGV[2..] the keys (fields) removed from every count hash.
local nc = tonumber(ARGV[1])
for i = 1, nc do
  redis.call('HDEL', KEYS[i], unpack(ARGV, 2))
end
for i = nc + 1, #KEYS, 1000 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 999, #KEYS)))
end
return 1

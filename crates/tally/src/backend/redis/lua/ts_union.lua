-- The union of HyperLogLogs: those of this slot (KEYS[3..]) and serialized
-- ones from other slots (ARGV[2..]), merged in temporary keys that are
-- deleted before returning.
--
-- KEYS[1], KEYS[2]: temporary accumulator and scratch keys (this slot)
-- ARGV[1]  'count' to return the union's cardinality, 'dump' to return the
--          union serialized (for a second step in another slot)
redis.call('DEL', KEYS[1])
redis.call('PFADD', KEYS[1])
for i = 3, #KEYS, 500 do
  redis.call('PFMERGE', KEYS[1], unpack(KEYS, i, math.min(i + 499, #KEYS)))
end
for i = 2, #ARGV do
  redis.call('SET', KEYS[2], ARGV[i])
  redis.call('PFMERGE', KEYS[1], KEYS[2])
end
local out
if ARGV[1] == 'count' then
  out = redis.call('PFCOUNT', KEYS[1])
else
  out = redis.call('GET', KEYS[1])
end
redis.call('DEL', KEYS[1], KEYS[2])
return out

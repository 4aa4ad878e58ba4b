-- Merge, step 3 of 3, in `from`'s slot: deletes the journal of merge id
-- ARGV[1] (KEYS[1]) and its data keys (KEYS[2..]), if it is still that
-- merge's journal. Returns 1 when deleted.
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then
  return 0
end
for i = 1, #KEYS, 1000 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 999, #KEYS)))
end
return 1

-- Merge, step 1 of 3, in the slot of the key merged away (`from`): moves
-- all of `from`'s data into a journal in the same slot, atomically. Nothing
-- is deleted, only moved, so a crash after this step loses nothing: the
-- next merge of the same keys finds the journal and finishes it first.
--
-- KEYS[1]: the journal hash `{..from's tag..}:mj:<into>`; then 5 keys per
--          bucket: count hash, distinct key, frequency key, and the
--          journal's distinct and frequency keys for that bucket.
-- ARGV[1]  `from`; ARGV[2] a fresh merge id; ARGV[3] the journal's EXPIREAT;
--          then one label `<rollup>:<bucket>` per bucket.
-- Returns {0, id} when a journal already existed (nothing moved: finish
-- that merge first), {1, id} when data moved, {2, ''} when there was none.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGET', KEYS[1], 'id') or ''}
end
local from, moved = ARGV[1], 0
for i = 1, #ARGV - 3 do
  local base = 1 + (i - 1) * 5
  local label = ARGV[3 + i]
  local v = redis.call('HGET', KEYS[base + 1], from)
  if v then
    redis.call('HDEL', KEYS[base + 1], from)
    redis.call('HSET', KEYS[1], 'c:' .. label, v)
    moved = moved + 1
  end
  if redis.call('EXISTS', KEYS[base + 2]) == 1 then
    redis.call('RENAME', KEYS[base + 2], KEYS[base + 4])
    redis.call('HSET', KEYS[1], 'd:' .. label, '1')
    moved = moved + 1
  end
  if redis.call('EXISTS', KEYS[base + 3]) == 1 then
    redis.call('RENAME', KEYS[base + 3], KEYS[base + 5])
    redis.call('HSET', KEYS[1], 'f:' .. label, '1')
    moved = moved + 1
  end
end
if moved == 0 then
  return {2, ''}
end
redis.call('HSET', KEYS[1], 'id', ARGV[2])
redis.call('EXPIREAT', KEYS[1], ARGV[3])
return {1, ARGV[2]}

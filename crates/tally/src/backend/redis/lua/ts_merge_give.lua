-- Merge, step 2 of 3, in the slot of the key merged into (`into`): adds a
-- journal's data to `into`, once per merge id (a marker key records it, so
-- a retried step adds nothing twice).
--
-- KEYS[1]: the marker `{..into's tag..}:mm:<id>`; KEYS[2]: a scratch key
--          for serialized HyperLogLogs; KEYS[3..]: targets.
-- ARGV[1]  capacity of frequency summaries; ARGV[2] the marker's EXPIREAT;
--          ARGV[3..] the ops (ts_ops.lua, prepended with kind_top.lua),
--          counts first, distinct sets as serialized HyperLogLogs ('2h').
-- Returns 1 when applied, 0 when this merge id was applied before; on an
-- overflow nothing stays written (the marker neither) and the error
-- "TALLY_OVERFLOW merge" is returned.
if not redis.call('SET', KEYS[1], '1', 'NX', 'EXAT', ARGV[2]) then
  return 0
end
if ts_apply(3, tonumber(ARGV[1]), KEYS[2]) then
  redis.call('DEL', KEYS[1])
  return redis.error_reply('TALLY_OVERFLOW merge')
end
return 1

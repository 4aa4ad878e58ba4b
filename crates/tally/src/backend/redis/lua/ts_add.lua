-- Merges deltas into one (model, virtual shard)'s buckets, each with its
-- bucket's expiry, all or nothing: the one write script of every kind the
-- time-series store keeps, in Sentry's layout (the ops: ts_ops.lua,
-- prepended with kind_top.lua).
--
-- KEYS: the buckets' keys (see ts_ops.lua)
-- ARGV[1]  capacity (items kept per summary); ARGV[2..] the ops, sums first
-- On an overflow nothing stays written and the error "TALLY_OVERFLOW <op>"
-- is returned (op counted from 0). Returns 1.
local failed = ts_apply(2, tonumber(ARGV[1]), nil)
if failed then
  return redis.error_reply('TALLY_OVERFLOW ' .. failed)
end
return 1

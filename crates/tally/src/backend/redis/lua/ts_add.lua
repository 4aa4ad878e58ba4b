-- Merges deltas into one (model, virtual shard)'s buckets, each with its
-- bucket's expiry, all or nothing: the one write script of every kind the
-- time-series store keeps, in Sentry's layout (the ops: ts_ops.lua,
-- prepended with kind_top.lua, and once.lua).
--
-- KEYS: the buckets' keys (see ts_ops.lua), a keyed write's mark, and a
--       scratch key for the ops that carry a HyperLogLog's bytes
-- ARGV[1]  capacity (items kept per summary)
-- ARGV[2]  the KEYS index of the mark, `{<tag>}:applied:<writer hex>`
--          (once.lua), or 0 for a write without a key
-- ARGV[3]  the KEYS index of the scratch key, `{<tag>}:mtmp` (left
--          deleted), or 0 when no op carries a HyperLogLog (`2h`)
-- ARGV[4..] the ops, sums first
-- On an overflow nothing stays written and the error "TALLY_OVERFLOW <op>"
-- is returned (op counted from 0). Returns 1, or 0 when the mark was there
-- already (nothing is written).
local mark = KEYS[tonumber(ARGV[2])]
if once_applied(mark) then
  return 0
end
local failed = ts_apply(4, tonumber(ARGV[1]), KEYS[tonumber(ARGV[3])])
if failed then
  return redis.error_reply('TALLY_OVERFLOW ' .. failed)
end
once_mark(mark)
return 1

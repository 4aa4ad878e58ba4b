-- The time-series store's write ops, one format for every kind, shared by
-- ts_add.lua (writes) and ts_merge_give.lua (a merge's second step);
-- prepended after kind_top.lua.
--
-- KEYS: count hashes `{<prefix>:ts:<model>:<vshard>}:c:<rollup>:<bucket>`,
--       HyperLogLogs `<tag>:d:<rollup>:<bucket>:<key>` and most-frequent
--       summaries `<tag>:f:<rollup>:<bucket>:<key>` (sorted sets)
-- An op: kind code (`Kind::code`), key index, EXPIREAT (bucket start +
-- rollup × samples), then
--   1 (sum):        field (the key), delta                 HINCRBY
--   2 (distinct):   m, then m values                       PFADD
--   2h (distinct):  one serialized HyperLogLog (Redis's    PFMERGE through
--                   own bytes, from another slot)          the scratch key
--   3 (top):        m, then m pairs item, count            top_add_pairs
-- Sums come first in a call, so an overflow is refused before anything
-- that cannot be taken back was written.
--
-- ts_apply(at, cap, scratch) applies the ops of ARGV[at..] in order, each
-- key's EXPIREAT set as it is written. If an HINCRBY fails (overflow), the
-- sums already added are taken back and the failing op's number (from 0)
-- is returned; nil when every op was applied.
local function ts_apply(at, cap, scratch)
  local sums = {}
  local i = 0
  while at <= #ARGV do
    local kind, key, expire = ARGV[at], KEYS[tonumber(ARGV[at + 1])], ARGV[at + 2]
    if kind == '1' then
      local field, delta = ARGV[at + 3], ARGV[at + 4]
      local r = redis.pcall('HINCRBY', key, field, delta)
      if type(r) == 'table' and r.err then
        for j = #sums, 1, -1 do
          local s = sums[j]
          if redis.call('HINCRBY', s[1], s[2], '-' .. s[3]) == 0 then
            redis.call('HDEL', s[1], s[2])
          end
        end
        return i
      end
      sums[#sums + 1] = {key, field, delta}
      at = at + 5
    elseif kind == '2' then
      local m = tonumber(ARGV[at + 3])
      for j = 0, m - 1, 1000 do
        redis.call('PFADD', key, unpack(ARGV, at + 4 + j, at + 3 + math.min(j + 1000, m)))
      end
      at = at + 4 + m
    elseif kind == '2h' then
      redis.call('SET', scratch, ARGV[at + 3])
      redis.call('PFMERGE', key, scratch)
      redis.call('DEL', scratch)
      at = at + 4
    else
      at = top_add_pairs(key, at + 3, cap)
    end
    redis.call('EXPIREAT', key, expire)
    i = i + 1
  end
  return nil
end

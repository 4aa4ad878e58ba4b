-- Merge, step 2 of 3, in the slot of the key merged into (`into`): adds a
-- journal's data to `into`, once per merge id (a marker key records it, so
-- a retried step adds nothing twice).
--
-- KEYS[1]: the marker `{..into's tag..}:mm:<id>`; KEYS[2]: a scratch key
--          for serialized HyperLogLogs; KEYS[3..]: targets.
-- ARGV[1]  `into`; ARGV[2] capacity of frequency summaries; ARGV[3] the
--          marker's EXPIREAT; then entries, counts first:
--          'c', target index, EXPIREAT, count
--          'd', target index, EXPIREAT, serialized HyperLogLog
--          'f', target index, EXPIREAT, m, then m pairs item, count
-- Items go through `top_add` (kind_top.lua, prepended).
-- Returns 1 when applied, 0 when this merge id was applied before.
if not redis.call('SET', KEYS[1], '1', 'NX', 'EXAT', ARGV[3]) then
  return 0
end
local into, cap = ARGV[1], tonumber(ARGV[2])
local added = {}
local at = 4
while at <= #ARGV do
  local kind, key, expire = ARGV[at], KEYS[tonumber(ARGV[at + 1])], ARGV[at + 2]
  if kind == 'c' then
    local r = redis.pcall('HINCRBY', key, into, ARGV[at + 3])
    if type(r) == 'table' and r.err then
      for _, a in ipairs(added) do
        if redis.call('HINCRBY', a[1], into, '-' .. a[2]) == 0 then
          redis.call('HDEL', a[1], into)
        end
      end
      redis.call('DEL', KEYS[1])
      return redis.error_reply('TALLY_OVERFLOW merge')
    end
    added[#added + 1] = {key, ARGV[at + 3]}
    at = at + 4
  elseif kind == 'd' then
    redis.call('SET', KEYS[2], ARGV[at + 3])
    redis.call('PFMERGE', key, KEYS[2])
    redis.call('DEL', KEYS[2])
    at = at + 4
  else
    at = top_add_pairs(key, at + 3, cap)
  end
  redis.call('EXPIREAT', key, expire)
end
return 1

-- Merges one change into a buffered row, all or nothing, and marks the row
-- pending.
--
-- KEYS[1]  the row hash ({tag}:row:<row id>): c:<col> -> delta, l:<col> -> value
-- KEYS[2]  the shard's pending sorted set (row id -> ms of its oldest change)
-- KEYS[3]  a keyed change's mark, {tag}:applied:<writer hex> (once.lua,
--          prepended); absent for a change without a key
-- ARGV[1]  now, Unix ms
-- ARGV[2]  the row id
-- ARGV[3]  n, the number of deltas
-- ARGV[4 .. 3+2n]  n pairs: field (c:<col>), delta
-- then pairs to the end: field (l:<col>), value
--
-- An overflowing HINCRBY takes back the deltas already added and returns
-- the error "TALLY_OVERFLOW <field>"; nothing is changed. Returns 1, or 0
-- when the mark was there already (nothing is changed).
if once_applied(KEYS[3]) then
  return 0
end
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  local field, delta = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  local r = redis.pcall('HINCRBY', KEYS[1], field, delta)
  if type(r) == 'table' and r.err then
    for j = i - 1, 0, -1 do
      local f, d = ARGV[4 + 2 * j], ARGV[5 + 2 * j]
      local left
      if string.sub(d, 1, 1) == '-' then
        left = redis.call('HINCRBY', KEYS[1], f, string.sub(d, 2))
      else
        left = redis.call('HINCRBY', KEYS[1], f, '-' .. d)
      end
      if left == 0 then
        redis.call('HDEL', KEYS[1], f)
      end
    end
    return redis.error_reply('TALLY_OVERFLOW ' .. field)
  end
end
local at = 4 + 2 * n
while at < #ARGV do
  redis.call('HSET', KEYS[1], ARGV[at], ARGV[at + 1])
  at = at + 2
end
redis.call('ZADD', KEYS[2], 'NX', ARGV[1], ARGV[2])
once_mark(KEYS[3])
return 1

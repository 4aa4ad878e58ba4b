-- Counts views of one entity atomically, in seed 004's layout: the views
-- hash is the whole state, so the seed's own code (HINCRBY of a day, HMGET
-- of dates, its HVALS total) and Tally may write and read it in any order
-- (lua/daily_sum.lua is prepended).
--
-- KEYS[1]: {<prefix>:<id>}:views  hash YYYYMMDD -> views (the seed's key),
--          plus `before`: the views of the days that left the window. The
--          seed's HMGET of dates never asks for it; its HVALS total
--          includes it, so that total stays the all-time total.
-- KEYS[2]: {<prefix>:<id>}:stats  an earlier Tally's running total and
--          oldest day: migrated here (its missing part goes to `before`,
--          the key is deleted, the views hash loses that Tally's TTL)
-- KEYS[3]: {<prefix>:<id>}:applied:<writer hex>  a keyed write's mark
--          (lua/once.lua, prepended), absent for a write without a key:
--          when it is there the views were counted already, nothing is
--          written and the counts are returned as they are
-- ARGV[1]  the day, YYYYMMDD
-- ARGV[2]  views to add (>= 1)
-- ARGV[3]  the oldest day kept, YYYYMMDD: older day fields are folded into
--          `before`, and views dated before it are added to `before`
--
-- One HGETALL of the hash (at most retention + 1 fields, as every write
-- folds the older days): no scan over entities, no cleaner. Every sum is
-- checked before anything is written, so on overflow nothing is and the
-- error is "TALLY_OVERFLOW <what>". Returns {day count, hi, lo, applied}:
-- the day's count afterwards (0 for a day before the window), the all-time
-- total afterwards, hi * 10^9 + lo, and 1 (0 when the mark was there).
local day, count, floor = ARGV[1], ARGV[2], ARGV[3]
-- YYYYMMDD texts order as their dates do.
local in_window = day >= floor
local flat = redis.call('HGETALL', KEYS[1])
local total, bad = sum_values(flat, 2, 2)
if not total then
  return redis.error_reply('TALLY_CORRUPT ' .. KEYS[1] .. ' ' .. flat[bad - 1])
end
-- fold: what `before` receives (old days, an earlier Tally's missing part
-- and views dated before the window).
local day_now, before_now, fold, old = sum_new(), sum_new(), sum_new(), {}
for i = 1, #flat, 2 do
  local field = flat[i]
  if field == day then
    sum_add(day_now, flat[i + 1])
  elseif field == 'before' then
    sum_add(before_now, flat[i + 1])
  end
  if #field == 8 and field < floor and not string.find(field, '%D') then
    old[#old + 1] = field
    sum_add(fold, flat[i + 1])
  end
end
local gap, err = add_legacy(total, KEYS[2])
if err then
  return err
end
if once_applied(KEYS[3]) then
  local seen = 0
  if in_window then
    seen = sum_text(day_now)
  end
  sum_norm(total)
  return {seen, total[1], total[2], 0}
end
if gap then
  sum_merge(fold, gap, 1)
end
sum_add(total, count)
if not sum_fits(total) then
  return redis.error_reply('TALLY_OVERFLOW total')
end
if in_window then
  sum_add(day_now, count)
  if not sum_fits(day_now) then
    return redis.error_reply('TALLY_OVERFLOW day')
  end
else
  sum_add(fold, count)
end
sum_merge(before_now, fold, 1)
if not sum_fits(before_now) then
  -- Only reachable when another writer stored negative views.
  return redis.error_reply('TALLY_OVERFLOW `before` (the views of days before the window)')
end
-- Everything fits: write.
local day_count = 0
if in_window then
  day_count = redis.call('HINCRBY', KEYS[1], day, count)
end
if not sum_is_zero(fold) then
  redis.call('HINCRBY', KEYS[1], 'before', sum_text(fold))
end
for i = 1, #old, 1000 do
  redis.call('HDEL', KEYS[1], unpack(old, i, math.min(i + 999, #old)))
end
if gap then
  redis.call('DEL', KEYS[2])
  redis.call('PERSIST', KEYS[1])
end
once_mark(KEYS[3])
sum_norm(total)
return {day_count, total[1], total[2], 1}

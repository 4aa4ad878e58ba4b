-- Counts views of one entity atomically, in the daily-statistics article's
-- layout (docs/reference.md): the views hash is the whole state, so the
-- article's own code (HINCRBY of a day, HMGET of dates, its HVALS total)
-- and Tally may write and read it in any order (lua/daily_sum.lua is
-- prepended).
--
-- KEYS[1]: {<prefix>:<id>}:views  hash YYYYMMDD -> views (the article's key),
--          plus `before`: the views of the days that left the window. The
--          article's HMGET of dates never asks for it; its HVALS total
--          includes it, so that total stays the all-time total.
-- KEYS[2]: {<prefix>:<id>}:stats  an earlier Tally's running total and
--          oldest day: migrated here (its missing part goes to `before`,
--          the key is deleted, the views hash loses that Tally's TTL)
-- KEYS[3]: {<prefix>:<id>}:applied:<writer hex>  a keyed write's mark
--          (lua/once.lua, prepended), absent for a write without a key:
--          when it is there the views were counted already, nothing is
--          written and the counts are returned as they are
-- ARGV[1]  the oldest day kept, YYYYMMDD: older day fields are folded into
--          `before`, and views dated before it are added to `before`
-- ARGV[2..] the entity's writes of the batch, in order: day (YYYYMMDD),
--          views to add (>= 1); one call carries them all, so a keyed
--          batch's mark covers every write of the entity
--
-- One HGETALL of the hash (at most retention + 1 fields, as every write
-- folds the older days): no scan over entities, no cleaner. Every sum is
-- checked before anything is written, so on overflow nothing is and the
-- error is "TALLY_OVERFLOW <what>". Returns {applied, then per write: day
-- count, hi, lo}: 1 (0 when the mark was there), then each write's day's
-- count after it (0 for a day before the window; decimal text) and the
-- all-time total after it, hi * 10^9 + lo.
local floor = ARGV[1]
local flat = redis.call('HGETALL', KEYS[1])
local total, bad = sum_values(flat, 2, 2)
if not total then
  return redis.error_reply('TALLY_CORRUPT ' .. KEYS[1] .. ' ' .. flat[bad - 1])
end
-- fold: what `before` receives (old days, an earlier Tally's missing part
-- and views dated before the window). stored: the day fields' values.
local before_now, fold, old, stored = sum_new(), sum_new(), {}, {}
for i = 1, #flat, 2 do
  local field = flat[i]
  if field == 'before' then
    sum_add(before_now, flat[i + 1])
  elseif #field == 8 and not string.find(field, '%D') then
    if field < floor then
      old[#old + 1] = field
      sum_add(fold, flat[i + 1])
    else
      stored[field] = flat[i + 1]
    end
  end
end
local gap, err = add_legacy(total, KEYS[2])
if err then
  return err
end
-- A day's count as it is now (and as the writes move it).
local days = {}
local function day_sum(day)
  if not days[day] then
    local s = sum_new()
    sum_add(s, stored[day] or '0')
    days[day] = s
  end
  return days[day]
end
local out = {1}
if once_applied(KEYS[3]) then
  out[1] = 0
  sum_norm(total)
  for i = 2, #ARGV, 2 do
    local seen = '0'
    -- YYYYMMDD texts order as their dates do.
    if ARGV[i] >= floor then
      seen = sum_text(day_sum(ARGV[i]))
    end
    out[#out + 1] = seen
    out[#out + 1] = total[1]
    out[#out + 1] = total[2]
  end
  return out
end
if gap then
  sum_merge(fold, gap, 1)
end
local touched = {}
for i = 2, #ARGV, 2 do
  local day, count = ARGV[i], ARGV[i + 1]
  sum_add(total, count)
  if not sum_fits(total) then
    return redis.error_reply('TALLY_OVERFLOW total')
  end
  local day_count = '0'
  if day >= floor then
    local s = day_sum(day)
    sum_add(s, count)
    if not sum_fits(s) then
      return redis.error_reply('TALLY_OVERFLOW day')
    end
    if not touched[day] then
      touched[day] = true
      touched[#touched + 1] = day
    end
    day_count = sum_text(s)
  else
    sum_add(fold, count)
  end
  out[#out + 1] = day_count
  out[#out + 1] = total[1]
  out[#out + 1] = total[2]
end
sum_merge(before_now, fold, 1)
if not sum_fits(before_now) then
  -- Only reachable when another writer stored negative views.
  return redis.error_reply('TALLY_OVERFLOW `before` (the views of days before the window)')
end
-- Everything fits: write.
for _, day in ipairs(touched) do
  redis.call('HSET', KEYS[1], day, sum_text(days[day]))
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
return out

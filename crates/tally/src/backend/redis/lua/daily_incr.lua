-- Counts views of one or more entities, in the daily-statistics article's
-- layout (docs/reference.md): the views hash is the whole state, so the
-- article's own code (HINCRBY of a day, HMGET of dates, its HVALS total)
-- and Tally may write and read it in any order (lua/once.lua and
-- lua/daily_sum.lua are prepended). Each entity's part is atomic on its
-- own: an entity refused (overflow, a value that is not an integer) is
-- left as it was and the others are written.
--
-- KEYS: the writer lane's record when ARGV[1] is '1'
--       (`<prefix>:daily-writer:<writer hex>:<lane>`, or on a cluster
--       `<prefix>:daily-writer:{<tag of the slot>}:<writer hex>:<lane>`),
--       then per entity, in ARGV's order:
--       {<prefix>:<id>}:views  hash YYYYMMDD -> views (the article's key),
--           plus `before`: the views of the days that left the window. The
--           article's HMGET of dates never asks for it; its HVALS total
--           includes it, so that total stays the all-time total.
--       {<prefix>:<id>}:stats  an earlier Tally's running total and oldest
--           day: migrated here (its missing part goes to `before`, the key
--           is deleted, the views hash loses that Tally's TTL)
--       {<prefix>:<id>}:applied:<writer hex>  a keyed write's mark, when
--           ARGV[3] is '1' (lua/once.lua)
-- ARGV[1]  '1' when KEYS[1] is the writer lane's record, else '0'
-- ARGV[2]  the call's sequence number in that lane (else '0')
-- ARGV[3]  '1' when each entity has a mark key, else '0'
-- ARGV[4]  the oldest day kept, YYYYMMDD: older day fields are folded into
--          `before`
-- ARGV[5]  the number of entities; then per entity: n, the views it adds
--          to `before` (those dated before the window; '0' for none), then
--          n pairs of day (YYYYMMDD, not before the window, each once) and
--          views to add
--
-- Per entity one HGETALL of the hash (at most retention + 2 fields, as
-- every write folds the older days), and one HSET of its days: no scan
-- over entities, no cleaner. Every sum is checked before anything of the
-- entity is written. Sums are exact (two limbs, lua/daily_sum.lua).
--
-- Returns a flat list, per entity: its status, then
--   1 (written) or 0 (its mark, or the lane's record, says it was applied
--   already: nothing written): n day counts after the write (decimal
--   texts), then the all-time total after it as hi, lo (hi * 10^9 + lo);
--   2 overflow of the total, 3 overflow of a day, 4 overflow of `before`,
--   5 a value that is not an integer; then "<key> <field>" (nothing
--   written for the entity).
-- The lane's record is set to the sequence number (7 days) when the call
-- was not a replay.

local lane = ARGV[1] == '1'
local marks = ARGV[3] == '1'
local floor = ARGV[4]
local entities = tonumber(ARGV[5])
local per = marks and 3 or 2

local replay = false
if lane then
  local last = redis.call('GET', KEYS[1])
  replay = last ~= false and tonumber(ARGV[2]) <= tonumber(last)
end

local out = {}
local k = lane and 2 or 1
local at = 6
for _ = 1, entities do
  local views, stats, mark = KEYS[k], KEYS[k + 1], nil
  if marks then
    mark = KEYS[k + 2]
  end
  k = k + per
  local n, before = tonumber(ARGV[at]), ARGV[at + 1]
  local first = at + 2
  at = first + 2 * n
  local status, detail = 1, nil
  local flat = redis.call('HGETALL', views)
  local total, bad = sum_values(flat, 2, 2)
  -- fold: what `before` receives (old days, an earlier Tally's missing
  -- part and views dated before the window). stored: the day fields.
  local before_now, fold, old, stored = sum_new(), sum_new(), {}, {}
  local gap = nil
  if not total then
    status, detail = 5, views .. ' ' .. flat[bad - 1]
  else
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
    local err
    gap, err = add_legacy(total, stats)
    if err then
      status, detail = 5, stats .. ' total'
    end
  end
  local counts = {}
  if status == 1 and (replay or once_applied(mark)) then
    status = 0
    for i = first, first + 2 * n - 1, 2 do
      counts[#counts + 1] = stored[ARGV[i]] or '0'
    end
  elseif status == 1 then
    if gap then
      sum_merge(fold, gap, 1)
    end
    sum_add(total, before)
    sum_add(fold, before)
    for i = first, first + 2 * n - 1, 2 do
      sum_add(total, ARGV[i + 1])
      local s = sum_new()
      sum_add(s, stored[ARGV[i]] or '0')
      sum_add(s, ARGV[i + 1])
      if not sum_fits(s) then
        status, detail = 3, views .. ' ' .. ARGV[i]
        break
      end
      counts[#counts + 1] = sum_text(s)
    end
    if status == 1 and not sum_fits(total) then
      status, detail = 2, views .. ' total'
    end
    sum_merge(before_now, fold, 1)
    if status == 1 and not sum_fits(before_now) then
      -- Only reachable when another writer stored negative views.
      status, detail = 4, views .. ' before'
    end
    if status == 1 then
      -- Everything fits: write.
      if n > 0 then
        local set = {}
        for j = 1, n do
          set[2 * j - 1] = ARGV[first + 2 * (j - 1)]
          set[2 * j] = counts[j]
        end
        redis.call('HSET', views, unpack(set))
      end
      if not sum_is_zero(fold) then
        redis.call('HINCRBY', views, 'before', sum_text(fold))
      end
      for i = 1, #old, 1000 do
        redis.call('HDEL', views, unpack(old, i, math.min(i + 999, #old)))
      end
      if gap then
        redis.call('DEL', stats)
        redis.call('PERSIST', views)
      end
      once_mark(mark)
    end
  end
  out[#out + 1] = status
  if status <= 1 then
    for j = 1, n do
      out[#out + 1] = counts[j]
    end
    sum_norm(total)
    out[#out + 1] = total[1]
    out[#out + 1] = total[2]
  else
    out[#out + 1] = detail
  end
end
if lane and not replay then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', 604800)
end
return out

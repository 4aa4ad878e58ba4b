-- Counts views of one or more entities, in the daily-statistics article's
-- layout (docs/reference.md): the views hash is the whole state, so the
-- article's own code (HINCRBY of a day, HMGET of dates, its HVALS total)
-- and Tally may write and read it in any order (lua/once.lua,
-- lua/daily_sum.lua and lua/daily_call.lua are prepended,
-- lua/daily_each.lua appended). Each entity's part is atomic on its own:
-- an entity refused (overflow, a value that is not an integer) is left as
-- it was and the others are written.
--
-- KEYS: the writer lane's record when ARGV[1] is '1'
--       (`<prefix>:daily-writer:<writer hex>:<lane>`, or on a cluster
--       `<prefix>:daily-writer:{<tag of the slot>}:<writer hex>:<lane>`),
--       then each entity's views key, then each one's stats key, then,
--       when ARGV[3] is '1', each one's mark key, all in ARGV's order:
--       {<prefix>:<id>}:views  hash YYYYMMDD -> views (the article's key),
--           plus `before`: the views of the days that left the window. The
--           article's HMGET of dates never asks for it; its HVALS total
--           includes it, so that total stays the all-time total.
--       {<prefix>:<id>}:stats  an earlier Tally's running total and oldest
--           day: migrated here (its missing part goes to `before`, the key
--           is deleted, the views hash loses that Tally's TTL)
--       {<prefix>:<id>}:applied:<writer hex>  a keyed write's mark
--           (lua/once.lua)
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
-- over entities, no cleaner. The stats keys of the whole call are looked
-- up by one EXISTS first: an entity's `:stats` total is read only when one
-- of them is there (data of an earlier Tally not migrated yet). Every sum
-- is checked before anything of the entity is written, and every sum is
-- exact: in plain Lua numbers (`small`) while every value read and every
-- sum made stays below 2^53 in magnitude, where doubles hold integers
-- exactly; else in two limbs (`exact`, lua/daily_sum.lua).
--
-- Returns a flat list, per entity: its status, then
--   1 (written) or 0 (its mark, or the lane's record, says it was applied
--   already: nothing written): n day counts after the write (integers or
--   decimal texts), then the all-time total after it as hi, lo
--   (hi * 10^9 + lo);
--   2 overflow of the total, 3 overflow of a day, 4 overflow of `before`,
--   5 a value that is not an integer; then "<key> <field>" (nothing
--   written for the entity).
-- The lane's record is set to the sequence number (7 days) when the call
-- was not a replay.

-- Whether any entity of the call has an earlier Tally's `:stats` key.
local legacy = false
for i = s0 + 1, s0 + entities, 1000 do
  if redis.call('EXISTS', unpack(KEYS, i, min(i + 999, s0 + entities))) > 0 then
    legacy = true
    break
  end
end

-- Tables reused from entity to entity (each read up to its own count).
local old, counts, set = {}, {}, {}

-- One entity in two limbs, whatever its values (the general path): `flat`
-- is its HGETALL, its days are ARGV[first], ARGV[first + 2], ...
local function exact(views, stats, mark, flat, n, before, first)
  local status, detail = 1, nil
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
      elseif #field == 8 and not find(field, '%D') then
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
        redis.call('HDEL', views, unpack(old, i, min(i + 999, #old)))
      end
      if gap then
        redis.call('DEL', stats)
        redis.call('PERSIST', views)
      end
      once_mark(mark)
    end
  end
  if status <= 1 then
    answer(status, counts, n, total)
  else
    out[o + 1], out[o + 2] = status, detail
    o = o + 2
  end
end

-- 2^53: every integer of a smaller magnitude is a double exactly, and a
-- sum of two such integers is computed exactly whenever the result is
-- below it too (rounding is monotonic, so a true sum of 2^53 or more
-- could not come out below it).
local M = 9007199254740992

-- x and y each plus the integer text v, or nil when v or either sum
-- leaves (-M, M) (small's check: the caller then takes exact).
local function add_small(v, x, y)
  local a = tonumber(v)
  if a >= M or a <= -M then
    return nil
  end
  x, y = x + a, y + a
  if x >= M or x <= -M or y >= M or y <= -M then
    return nil
  end
  return x, y
end

-- One entity in plain numbers, without a table of its own; false (before
-- any write) when a value is not an integer below 2^53 or a sum would
-- reach 2^53, for `exact` to take it. Only called when no entity of the
-- call has a `:stats` key, so there is no earlier total to add.
local function small(views, mark, flat, n, before, first)
  -- total: every value; held: `before`'s; fold: the old days'; had1:
  -- the first day's (day1), nil when the hash has no such field.
  local total, held, fold, nold, had1 = 0, 0, 0, 0, nil
  local day1 = n > 0 and ARGV[first] or nil
  for i = 2, #flat, 2 do
    local x = tonumber(flat[i])
    if not x or x % 1 ~= 0 or x >= M or x <= -M then
      return false
    end
    if (x >= E9 or x <= -E9) and not find(flat[i], '^%-?%d+$') then
      -- Read as sum_values reads it: digits only from 10^9 on.
      return false
    end
    total = total + x
    if total >= M or total <= -M then
      return false
    end
    local field = flat[i - 1]
    if field == day1 then
      had1 = x
    elseif field == 'before' then
      held = x
    elseif #field == 8 and field < floor and not find(field, '%D') then
      nold = nold + 1
      old[nold] = field
      fold = fold + x
      if fold >= M or fold <= -M then
        return false
      end
    end
  end
  local applied = replay or (mark ~= nil and once_applied(mark))
  local stored = nil
  if n > 8 then
    -- Many days: look them up in a table rather than by a scan each.
    stored = {}
    for i = 1, #flat, 2 do
      stored[flat[i]] = flat[i + 1]
    end
  end
  if not applied and before ~= '0' then
    total, fold = add_small(before, total, fold)
    if not total then
      return false
    end
  end
  for j = 1, n do
    local day, count = ARGV[first + 2 * j - 2], 0
    if j == 1 then
      count = had1 or 0
    elseif stored then
      count = tonumber(stored[day] or '0')
    else
      for i = 1, #flat, 2 do
        if flat[i] == day then
          count = tonumber(flat[i + 1])
          break
        end
      end
    end
    if not applied then
      count, total = add_small(ARGV[first + 2 * j - 1], count, total)
      if not count then
        return false
      end
    end
    counts[j] = count
  end
  if not applied then
    local kept = held + fold
    if kept >= M or kept <= -M then
      return false
    end
    -- Everything fits 64 bits (it is below 2^53): write.
    if n == 1 then
      -- A new day's count is the views sent: their text as it came.
      redis.call('HSET', views, day1, had1 and counts[1] or ARGV[first + 1])
    elseif n > 1 then
      for j = 1, n do
        set[2 * j - 1] = ARGV[first + 2 * j - 2]
        set[2 * j] = counts[j]
      end
      redis.call('HSET', views, unpack(set, 1, 2 * n))
    end
    if fold ~= 0 then
      redis.call('HINCRBY', views, 'before', fold)
    end
    for i = 1, nold, 1000 do
      redis.call('HDEL', views, unpack(old, i, min(i + 999, nold)))
    end
    if mark ~= nil then
      once_mark(mark)
    end
  end
  out[o + 1] = applied and 0 or 1
  for j = 1, n do
    out[o + 1 + j] = counts[j]
  end
  out[o + n + 2], out[o + n + 3] = 0, total
  o = o + n + 3
  return true
end

-- One entity (lua/daily_each.lua calls it for each): the fast path in
-- plain numbers when it can, else the general one.
local function entity(views, stats, mark, n, before, first)
  local flat = redis.call('HGETALL', views)
  if legacy or not small(views, mark, flat, n, before, first) then
    exact(views, stats, mark, flat, n, before, first)
  end
end

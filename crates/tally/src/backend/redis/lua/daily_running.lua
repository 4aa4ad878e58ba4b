-- Counts views of one or more entities under the `running` daily total
-- (docs/storage.md): the all-time total is kept in the entity's stats key
-- and raised by HINCRBY with every write, so a write reads nothing of the
-- views hash. Only Tally may then write these entities: the article's own
-- HINCRBY of a day would not reach the total. lua/once.lua,
-- lua/daily_sum.lua and lua/daily_call.lua are prepended,
-- lua/daily_each.lua appended. Each entity's part is atomic on its own:
-- an entity refused (overflow, a value that is not an integer) is left as
-- it was and the others are written.
--
-- KEYS and ARGV are daily_incr.lua's, and so is the answer:
--   {<prefix>:<id>}:views  hash YYYYMMDD -> views (the article's key), plus
--       `before`: views dated before the window when they were sent (and
--       whatever the `hash` total left there)
--   {<prefix>:<id>}:stats  hash `total` -> the all-time total, and
--       `first` -> the oldest day the views hash may hold. A missing
--       one (data of the `hash` total) starts as the sum of the views hash,
--       which is that total's all-time total. The `hash` total's next write
--       folds it back into the views hash (daily_incr.lua's earlier-Tally
--       migration), so the two totals can be switched either way.
--
-- Per entity, in the common case (a day that has a field already), one
-- HINCRBY of the total and one of each day sent. A write that makes a new
-- day field also reads `first`; only when that day left the window (or is
-- not known) does it drop the days older than the window (HKEYS, HDEL:
-- their views are in the total already) and set `first` again.
--
-- Returns per entity: status 1 (written) or 0 (already applied: the stored
-- counts), the day counts, then the total as hi, lo (hi * 10^9 + lo);
-- 2 overflow of the total, 3 of a day, 4 of `before`, 5 a value that is
-- not an integer, then "<key> <field>".

-- Below 2^53 a Lua number holds an integer reply exactly.
local M = 9007199254740992

-- The status of a failed HINCRBY: 5 for a stored value that is not an
-- integer (or a key that is not a hash), else `overflow`.
local function failed(err, overflow)
  local text = type(err) == 'table' and err.err or tostring(err)
  if find(text, 'not an integer', 1, true) or find(text, 'WRONGTYPE', 1, true) then
    return 5
  end
  return overflow
end

local function refuse(status, detail)
  out[o + 1], out[o + 2] = status, detail
  o = o + 2
end

-- What a write already applied answers: the stored counts and total.
local function stored(views, stats, n, first)
  local flat = redis.call('HGETALL', views)
  local total, bad = sum_values(flat, 2, 2)
  if not total then
    return refuse(5, views .. ' ' .. flat[bad - 1])
  end
  local _, err = add_legacy(total, stats)
  if err then
    return refuse(5, stats .. ' total')
  end
  local counts = {}
  for j = 1, n do
    local day, count = ARGV[first + 2 * j - 2], '0'
    for i = 1, #flat, 2 do
      if flat[i] == day then
        count = flat[i + 1]
        break
      end
    end
    counts[j] = count
  end
  answer(0, counts, n, total)
end

local function negate(text)
  if string.sub(text, 1, 1) == '-' then
    return string.sub(text, 2)
  end
  return '-' .. text
end

-- Takes back what an entity's refused write did: its first `days` day
-- increments, `before`'s when `had_before`, and the total's (`add`; the
-- whole stats key when this write `created` it).
local function revert(views, stats, first, days, had_before, before, created, add)
  for j = days, 1, -1 do
    redis.call('HINCRBY', views, ARGV[first + 2 * j - 2], negate(ARGV[first + 2 * j - 1]))
  end
  if had_before then
    redis.call('HINCRBY', views, 'before', negate(before))
  end
  if created then
    redis.call('DEL', stats)
  else
    redis.call('HINCRBY', stats, 'total', negate(add))
  end
end

-- An integer reply as the answer gives it: the number below 2^53, else
-- the stored field's decimal text.
local function exact_reply(number, key, field)
  if number < M and number > -M then
    return number
  end
  return redis.call('HGET', key, field)
end

local counts = {}

local function entity(views, stats, mark, n, before, first)
  if replay or once_applied(mark) then
    return stored(views, stats, n, first)
  end
  -- add: every view of the call for this entity, as text.
  local add
  if before == '0' and n == 1 then
    add = ARGV[first + 1]
  else
    local s = sum_new()
    sum_add(s, before)
    for j = 1, n do
      sum_add(s, ARGV[first + 2 * j - 1])
    end
    add = sum_text(s)
  end
  local ok, total = pcall(redis.call, 'HINCRBY', stats, 'total', add)
  if not ok then
    local status = failed(total, 2)
    return refuse(status, (status == 5 and stats or views) .. ' total')
  end
  -- flat: the views hash before this write, when it was read.
  local created, flat = false, nil
  if total == tonumber(add) and (total < M or redis.call('HGET', stats, 'total') == add) then
    -- No total before this write (none is 0 once a view is counted):
    -- start it at the views hash's sum, the `hash` total's all-time total.
    created = true
    flat = redis.call('HGETALL', views)
    local sum, bad = sum_values(flat, 2, 2)
    if not sum then
      redis.call('DEL', stats)
      return refuse(5, views .. ' ' .. flat[bad - 1])
    end
    if not sum_is_zero(sum) then
      ok, total = pcall(redis.call, 'HINCRBY', stats, 'total', sum_text(sum))
      if not ok then
        redis.call('DEL', stats)
        return refuse(2, views .. ' total')
      end
    end
  end
  if before ~= '0' then
    local done, err = pcall(redis.call, 'HINCRBY', views, 'before', before)
    if not done then
      revert(views, stats, first, 0, false, before, created, add)
      return refuse(failed(err, 4), views .. ' before')
    end
  end
  -- fresh: the write made a day field; sent_min: its oldest day.
  local fresh, sent_min = false, nil
  for j = 1, n do
    local day, sent = ARGV[first + 2 * j - 2], ARGV[first + 2 * j - 1]
    if not sent_min or day < sent_min then
      sent_min = day
    end
    local done, count = pcall(redis.call, 'HINCRBY', views, day, sent)
    if not done then
      revert(views, stats, first, j - 1, before ~= '0', before, created, add)
      return refuse(failed(count, 3), views .. ' ' .. day)
    end
    if count == tonumber(sent) then
      fresh = true
    end
    counts[j] = count
  end
  if fresh and not (flat and #flat == 0) then
    -- A new day field: drop the days that left the window (their views
    -- are in the total), unless the stats key's `first`, the oldest day
    -- the hash may hold, is in the window still. The hash read above, if
    -- any, names the days it held (the days this write added are
    -- `sent_min` or later).
    local oldest = nil
    if not flat then
      oldest = redis.call('HGET', stats, 'first')
    end
    if oldest and oldest >= floor then
      if sent_min < oldest then
        redis.call('HSET', stats, 'first', sent_min)
      end
    else
      local old, nold, kept = {}, 0, sent_min
      local fields, step = flat, 2
      if not fields then
        fields, step = redis.call('HKEYS', views), 1
      end
      for i = 1, #fields, step do
        local field = fields[i]
        if #field == 8 and not find(field, '%D') then
          if field < floor then
            nold = nold + 1
            old[nold] = field
          elseif field < kept then
            kept = field
          end
        end
      end
      for i = 1, nold, 1000 do
        redis.call('HDEL', views, unpack(old, i, min(i + 999, nold)))
      end
      redis.call('HSET', stats, 'first', kept)
    end
  end
  once_mark(mark)
  out[o + 1] = 1
  for j = 1, n do
    out[o + 1 + j] = exact_reply(counts[j], views, ARGV[first + 2 * j - 2])
  end
  o = o + n + 1
  if total < M and total > -M then
    out[o + 1], out[o + 2] = 0, total
  else
    local s = sum_new()
    sum_add(s, redis.call('HGET', stats, 'total'))
    sum_norm(s)
    out[o + 1], out[o + 2] = s[1], s[2]
  end
  o = o + 2
end

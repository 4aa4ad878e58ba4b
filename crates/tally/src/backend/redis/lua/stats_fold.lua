-- The pending slice of a statistic (issue 20 §3), prepended after
-- kind_stats.lua to the statistics' apply script (engine_apply.lua) and to
-- the cleaner's engine_fold.lua.
--
-- In the default and compact layouts, an exact write of one statistic whose
-- cells are one per precision, all with the same delta (what one
-- observation gives, or several in one finest slice), is merged into the
-- statistic's pending slice instead of into every precision: the hash
-- `{<prefix>:<shard>}:<space>:pend:<name>`, with fields
--   s  the finest cell's field: which slice is pending
--   b  its blob (kind_stats.lua's encoding)
--   t  where that slice folds: `<precision>:<field>` for every precision,
--      finest first, separated by spaces
-- A write that opens a later finest slice first folds the pending blob into
-- every precision's slice (`t`), then starts the new one; a write older than
-- the pending slice goes to every precision at once; the cleaner folds
-- every pending slice before it trims. Reads add the pending blob to each
-- precision's slice that holds it. The stored slices and the pending one
-- never hold the same observation, so writes by either path (and by an
-- older Tally, which writes every precision) add up exactly.
--
-- A write's changes are noted in `undo` ({key, field, old value or false}),
-- so that a failed call takes all of them back (fold_undo).

local function fold_undo(undo)
  for i = #undo, 1, -1 do
    local u = undo[i]
    if u[3] then
      redis.call('HSET', u[1], u[2], u[3])
    else
      redis.call('HDEL', u[1], u[2])
    end
  end
end

-- Merges `delta` into `field` of hash `key`; nil, or the error's text.
local function fold_merge(undo, key, field, delta)
  local old = redis.call('HGET', key, field)
  local new = merge_stats(old, delta)
  if type(new) == 'table' then
    return new.err
  end
  undo[#undo + 1] = {key, field, old}
  redis.call('HSET', key, field, new)
  return nil
end

-- Folds the pending slice `pend` (its key; `cur` what HMGET of its s, b
-- and t answered) into each precision's field that `t` names, in the hash
-- `keys[i]` of the precision `precisions[i]` (texts); a precision the
-- statistic no longer keeps is passed over. Deletes it; nil, or the
-- error's text.
local function fold_held(undo, pend, keys, precisions, cur)
  if not cur[1] then
    return nil
  end
  for p, f in string.gmatch(cur[3] or '', '(%d+):(%d+)') do
    for i = 1, #keys do
      if precisions[i] == p then
        local e = fold_merge(undo, keys[i], f, cur[2])
        if e then
          return e
        end
        break
      end
    end
  end
  undo[#undo + 1] = {pend, 's', cur[1]}
  undo[#undo + 1] = {pend, 'b', cur[2]}
  undo[#undo + 1] = {pend, 't', cur[3]}
  redis.call('DEL', pend)
  return nil
end

-- fold_held of what `pend` holds now.
local function fold_pending(undo, pend, keys, precisions)
  return fold_held(undo, pend, keys, precisions, redis.call('HMGET', pend, 's', 'b', 't'))
end

-- A write of `delta` through the pending slice `pend` (`cur`: what HMGET of
-- its s, b and t answered) whose finest cell is `field` at `precision`
-- (texts): when that slice is the one pending, merges it there and
-- answers true; else false (fold_open does the write). Answers also the
-- error's text, if any.
local function fold_same(undo, pend, cur, precision, field, delta)
  -- The same slice: the same finest field at the same finest precision
  -- (after a change of precisions a field can name another slice); `t`
  -- starts with that precision and field.
  if cur[1] ~= field then
    return false, nil
  end
  local head, t = precision .. ':' .. field, cur[3] or ''
  if not (t == head or string.sub(t, 1, #head + 1) == head .. ' ') then
    return false, nil
  end
  local b = merge_stats(cur[2], delta)
  if type(b) == 'table' then
    return true, b.err
  end
  undo[#undo + 1] = {pend, 'b', cur[2]}
  redis.call('HSET', pend, 'b', b)
  return true, nil
end

-- Writes `delta` at `fields` (one per precision, finest first, in hashes
-- `keys`, of the precisions `precisions`, texts) through the pending slice
-- `pend` (`cur` as for fold_same) when fold_same did not: a write older
-- than the pending slice goes to every precision at once, a later one
-- folds the pending slice and takes its place. Returns nil, or the
-- error's text. (The call registers the statistic as every write does: a
-- cleaner of an older Tally, which knows no pending slice, may have
-- dropped it from its registry.)
local function fold_open(undo, pend, cur, keys, precisions, fields, delta)
  local f = fields[1]
  if cur[1] and tonumber(f) < tonumber(cur[1]) then
    -- Older than the pending slice: every precision at once.
    for i = 1, #keys do
      local e = fold_merge(undo, keys[i], fields[i], delta)
      if e then
        return e
      end
    end
    return nil
  end
  local checked = merge_stats(false, delta)
  if type(checked) == 'table' then
    return checked.err
  end
  local e = fold_held(undo, pend, keys, precisions, cur)
  if e then
    return e
  end
  local t = {}
  for i = 1, #fields do
    t[i] = precisions[i] .. ':' .. fields[i]
  end
  undo[#undo + 1] = {pend, 's', false}
  undo[#undo + 1] = {pend, 'b', false}
  undo[#undo + 1] = {pend, 't', false}
  redis.call('HSET', pend, 's', f, 'b', checked, 't', table.concat(t, ' '))
  return nil
end

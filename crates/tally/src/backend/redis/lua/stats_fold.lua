-- The pending slice of a series (issue 20 §3), prepended to the apply
-- script (engine_apply.lua) of statistics (after kind_stats.lua) and of sums
-- (after engine_undo.lua), and to the cleaner's engine_fold.lua, each after
-- a line setting FOLD_SUMS: true for sums (added with HINCRBY), false for
-- statistics (merged with merge_stats). A function of one kind only is
-- made only in that kind's scripts (`local f = FOLD_SUMS and function`,
-- false in the other's): Redis runs this file on every call (making them
-- cost a call of two busy counters 2 % of its instructions, by callgrind).
--
-- In the layouts that keep one (SpaceKeys::folds), an exact write of one
-- series whose cells are one per precision, all with the same delta (what
-- one observation or increment gives, or several in one finest slice), is
-- merged into the series' pending slice instead of into every precision:
-- the hash `{<prefix>:<shard>}[:<space>]:pend:<name>`, with fields
--   s  the finest cell's field: which slice is pending
--   b  its value (a statistic's blob, kind_stats.lua's encoding; a sum's
--      decimal integer)
--   t  where that slice folds: `<precision>:<field>` for every precision,
--      finest first, separated by spaces
--   q0, q1, q2, ...  statistics only: the queue of deltas written into
--      the slice since `b` was last merged (kind_stats.lua's
--      stats_queue_*): q0 its header, q<i> the i-th delta (their number is
--      the hash's length past s, b, t, q0 and the accumulator's fields);
--      q0 absent when a slice written before the accumulator keeps none.
--      `b` is of format 3 (an older Tally fails on it rather than miss the
--      queue). A slice of format 2 keeps its queue in one field `q`
--      instead (the header and the deltas): read as it is, made format 3
--      by the next write that merges it.
--   ak, at, a1, a2, ...  statistics only: the accumulator, the values of
--      the finest slices folded since the coarser precisions' slices last
--      took them: ak how many (absent: none), at the coarser slices they
--      fold into (`t` without its finest token, the same for all of
--      them), a<i> the i-th value (format 1), oldest first.
-- A write that opens a later finest slice first folds the pending value into
-- every precision's slice (`t`), then starts the new one; a write older than
-- the pending slice goes to every precision at once; the cleaner folds
-- every pending slice before it trims. A statistic's fold writes the
-- finest precision's slice and appends the value to the accumulator while
-- the coarser slices it folds into are the accumulator's (so that a
-- second's fold does not unpack, merge and pack a sketch per coarser
-- precision); when they are not, or it holds ACC_VALUES, the accumulator
-- is merged into its coarser slices first, its values in order (one
-- unpack and pack per slice). The cleaner's fold merges the accumulator,
-- then the pending value. Reads add the accumulator's values, then the
-- pending value, to each precision's slice that holds them. The stored
-- slices, the accumulator and the pending slice never hold the same
-- observation, so writes by either path (and by an older Tally, which
-- writes every precision) add up exactly.
--
-- A write's changes are noted in `undo` ({key, field, old value or false},
-- or for a sum {key, field, nil, delta added, true for a pending value},
-- or for sums written directly {key, false, false, false, false, the ARGV
-- index of their first (field, delta) pair, how many, true when the hash
-- was made by them}, or for a sum's cells written to every precision
-- {false, false, false, delta, false, false, false, false, KEYS base, KEYS
-- step, ARGV index of the first field, how many}), so that a failed call
-- takes all of them back (fold_undo). engine_apply.lua keeps the runs of
-- a series' hashes written directly, each added to in full, apart.

-- Sums: a pending slice adds up writes whose delta and running value are at
-- most SUM_SMALL characters (below 10^16 in magnitude), and is opened only
-- where every precision's slice it folds into is below SUM_OPEN (9 * 10^17)
-- in magnitude after the opening write. Precision slices change while it
-- exists only by direct writes, which check the sum with it
-- (fold_sum_check), so a fold never overflows.
local SUM_SMALL, SUM_OPEN = 16, 9e17

-- The most values a statistic's accumulator holds before it is merged.
local ACC_VALUES = 64

local function fold_undo(undo)
  for i = #undo, 1, -1 do
    local u = undo[i]
    if u[6] then
      -- Sums written directly: the u[7] ARGV pairs from u[6] added to hash
      -- u[1], or (u[8]) the hash made by them.
      if u[8] then
        redis.call('DEL', u[1])
      else
        for j = 0, u[7] - 1 do
          take_back(u[1], ARGV[u[6] + 2 * j], ARGV[u[6] + 2 * j + 1])
        end
      end
    elseif u[9] then
      -- A sum's cells written to every precision (fold_sum_open): u[12]
      -- of them, hash KEYS[u[9] + u[10] * j], field ARGV[u[11] + j].
      for j = 0, u[12] - 1 do
        take_back(KEYS[u[9] + u[10] * j], ARGV[u[11] + j], u[4])
      end
    elseif u[4] then
      -- A sum: subtracted (a pending value keeps its field, even at 0).
      if u[5] then
        local d = u[4]
        if d ~= '0' then
          redis.call('HINCRBY', u[1], 'b', string.sub(d, 1, 1) == '-' and string.sub(d, 2) or '-' .. d)
        end
      else
        take_back(u[1], u[2], u[4])
      end
    elseif u[3] then
      redis.call('HSET', u[1], u[2], u[3])
    else
      redis.call('HDEL', u[1], u[2])
    end
  end
end

-- What the pending slice `pend` holds, as the functions below take it
-- (`cur`): its s, b and t, and for statistics its q0 and how many values
-- its accumulator holds (a number), with b not read (nil) until a fold or
-- a merge asks for it (fold_b): a write into the slice pending only
-- appends to its queue.
local function fold_read(pend)
  if FOLD_SUMS then
    return redis.call('HMGET', pend, 's', 'b', 't')
  end
  local r = redis.call('HMGET', pend, 's', 't', 'q0', 'ak')
  return {r[1], nil, r[2], r[3], r[4] and tonumber(r[4]) or 0}
end

-- How many deltas the queue of `pend` (`cur` as fold_read answered it)
-- holds: its fields past s, b, t, q0 and the accumulator's (HLEN is
-- cheaper than a count of its own to read, write and take back).
local fold_count = not FOLD_SUMS and function(pend, cur)
  if not cur[4] then
    return 0
  end
  local acc = cur[5] > 0 and cur[5] + 2 or 0
  return redis.call('HLEN', pend) - 4 - acc
end

-- A statistic's queue in `pend` (`cur` as fold_read answered it): the
-- format 2 queue `q` (false unless the slice has no q0), the deltas q1 to
-- q<n> (a list) and n.
local fold_queue = not FOLD_SUMS and function(pend, cur)
  local n = fold_count(pend, cur)
  local deltas = {}
  if n > 0 then
    local names = {}
    for i = 1, n do
      names[i] = 'q' .. i
    end
    deltas = redis.call('HMGET', pend, unpack(names))
  end
  local q = false
  if not cur[4] then
    q = redis.call('HGET', pend, 'q')
  end
  return q, deltas, n
end

-- Notes in `undo` the queue of `pend` (`cur`, and what fold_queue
-- answered) as it is before it is taken away.
local fold_queue_undo = not FOLD_SUMS and function(undo, pend, cur, q, deltas)
  undo[#undo + 1] = {pend, 'q0', cur[4]}
  undo[#undo + 1] = {pend, 'q', q}
  for i = 1, #deltas do
    undo[#undo + 1] = {pend, 'q' .. i, deltas[i]}
  end
end

-- The b of `cur` (fold_read), read now when it was not.
local fold_b = not FOLD_SUMS and function(pend, cur)
  if cur[2] == nil then
    cur[2] = redis.call('HGET', pend, 'b')
  end
  return cur[2]
end

-- Merges `delta` into `field` of hash `key`; nil, or the error's text.
local function fold_merge(undo, key, field, delta)
  if FOLD_SUMS then
    local r = redis.pcall('HINCRBY', key, field, delta)
    if type(r) == 'table' and r.err then
      return r.err
    end
    undo[#undo + 1] = {key, field, nil, delta}
    return nil
  end
  local old = redis.call('HGET', key, field)
  local new = merge_stats(old, delta)
  if type(new) == 'table' then
    return new.err
  end
  undo[#undo + 1] = {key, field, old}
  redis.call('HSET', key, field, new)
  return nil
end

-- Value t (a table) packed as the precisions' slices keep it, format 1;
-- or, when t is nil, nil and the text of the error reply `err`.
local fold_pack = not FOLD_SUMS and function(t, err)
  if not t then
    return nil, err.err
  end
  t[1] = 1
  return cmsgpack.pack(t)
end

-- The hash of precision `p` (a text) among `keys`, the hashes of the
-- precisions `precisions` (texts); nil when the series no longer keeps p.
local function fold_key(keys, precisions, p)
  for i = 1, #keys do
    if precisions[i] == p then
      return keys[i]
    end
  end
  return nil
end

-- Merges the `k` values of the accumulator of `pend` into the slices its
-- `at` names (in `keys`, as for fold_key), in order, and takes them out
-- of it; nil, or the error's text. The bytes are those of merging each
-- value into each slice in turn (stats_merge_unpacked).
local fold_acc_merge = not FOLD_SUMS and function(undo, pend, keys, precisions, k)
  local names = {'at'}
  for i = 1, k do
    names[i + 1] = 'a' .. i
  end
  local r = redis.call('HMGET', pend, unpack(names))
  local at = r[1]
  if not at then
    return 'TALLY_FAILED stats: the accumulator names no slices (at)'
  end
  for i = 1, k do
    if not r[i + 1] then
      return 'TALLY_FAILED stats: the accumulator misses a' .. i
    end
  end
  local blob = table.concat(r, '', 2)
  for p, f in string.gmatch(at, '(%d+):(%d+)') do
    local key = fold_key(keys, precisions, p)
    if key then
      local old = redis.call('HGET', key, f)
      local new
      if not old and k == 1 then
        -- (As merge_stats keeps a delta into an empty slice.)
        new = r[2]
      else
        local all = {pcall(cmsgpack.unpack, blob)}
        if all[1] and #all ~= k + 1 then
          all = {false}
        end
        local o, err, first
        if old then
          o, err = stats_blob(old, 'stored value')
          first = 2
        else
          o, err = stats_table(all[2], 'accumulator')
          first = 3
        end
        if o then
          o, err = stats_merge_unpacked(o, all, first)
        end
        new, err = fold_pack(o, err)
        if not new then
          return err
        end
      end
      undo[#undo + 1] = {key, f, old}
      redis.call('HSET', key, f, new)
    end
  end
  undo[#undo + 1] = {pend, 'ak', tostring(k)}
  undo[#undo + 1] = {pend, 'at', at}
  for i = 1, k do
    undo[#undo + 1] = {pend, names[i + 1], r[i + 1]}
  end
  names[#names + 1] = 'ak'
  redis.call('HDEL', pend, unpack(names))
  return nil
end

-- Appends a statistic's folded value (format 1) to the accumulator of
-- `pend`, which holds `k` values, for the coarser slices `coarse` (`t`
-- past its finest token), merging what it holds first when it holds them
-- for other slices or is full; nil, or the error's text.
local fold_acc_add = not FOLD_SUMS and function(undo, pend, keys, precisions, k, coarse, value)
  if k > 0 and (k >= ACC_VALUES or redis.call('HGET', pend, 'at') ~= coarse) then
    local e = fold_acc_merge(undo, pend, keys, precisions, k)
    if e then
      return e
    end
    k = 0
  end
  local field = 'a' .. (k + 1)
  undo[#undo + 1] = {pend, field, false}
  undo[#undo + 1] = {pend, 'ak', k > 0 and tostring(k)}
  if k == 0 then
    undo[#undo + 1] = {pend, 'at', false}
    redis.call('HSET', pend, field, value, 'ak', 1, 'at', coarse)
  else
    redis.call('HSET', pend, field, value, 'ak', k + 1)
  end
  return nil
end

-- Folds the pending slice `pend` (its key; `cur` as fold_read answered)
-- into each precision's field that `t` names, in the hash `keys[i]` of
-- the precision `precisions[i]` (texts); a precision the series no
-- longer keeps is passed over. A statistic's fold for a write (`keep`)
-- writes only the finest slice and keeps the value in the accumulator
-- for the coarser ones (fold_acc_add); the cleaner's fold merges the
-- accumulator and the pending value into every slice and deletes `pend`.
-- nil, or the error's text.
local function fold_held(undo, pend, keys, precisions, cur, keep)
  local k = cur[5] or 0
  if not keep and k > 0 then
    -- (The accumulator holds older slices than the pending one.)
    local e = fold_acc_merge(undo, pend, keys, precisions, k)
    if e then
      return e
    end
    -- (Its fields are gone: the queue's count is the hash's length past
    -- s, b, t and q0 again.)
    cur[5] = 0
  end
  if not cur[1] then
    return nil
  end
  -- (A sum's pending slice opens at 0: nothing to fold then.)
  local nothing = FOLD_SUMS and cur[2] == '0'
  local value = cur[2]
  local q, deltas
  if not FOLD_SUMS then
    -- A statistic's value with its queue merged in, of format 1 as
    -- every precision's slices keep it.
    local b, n = fold_b(pend, cur), nil
    q, deltas, n = fold_queue(pend, cur)
    if n > 0 or (q and #q > 9) then
      local err
      value, err = fold_pack(stats_pending_value(b, q, deltas))
      if not value then
        return err
      end
    else
      value = stats_format(b, 1)
    end
  end
  local tokens = nothing and '' or cur[3] or ''
  local coarse = nil
  if keep and not FOLD_SUMS then
    local finest
    finest, coarse = string.match(tokens, '^(%S+) ?(.*)$')
    tokens = finest or ''
  end
  for p, f in string.gmatch(tokens, '(%d+):(%d+)') do
    local key = fold_key(keys, precisions, p)
    if key then
      local e = fold_merge(undo, key, f, value)
      if e then
        return e
      end
    end
  end
  if coarse and coarse ~= '' then
    local e = fold_acc_add(undo, pend, keys, precisions, k, coarse, value)
    if e then
      return e
    end
  end
  undo[#undo + 1] = {pend, 's', cur[1]}
  undo[#undo + 1] = {pend, 'b', cur[2]}
  undo[#undo + 1] = {pend, 't', cur[3]}
  if FOLD_SUMS then
    redis.call('DEL', pend)
    return nil
  end
  fold_queue_undo(undo, pend, cur, q, deltas)
  if not keep or (k == 0 and not (coarse and coarse ~= '')) then
    -- (Nothing accumulated: the hash goes whole.)
    redis.call('DEL', pend)
    return nil
  end
  -- (HDEL, not DEL: the accumulator stays. Each field is looked for in
  -- the hash's listpack: a format 2 queue's `q` only where it is.)
  local gone = {'s', 'b', 't', 'q0'}
  if q then
    gone[5] = 'q'
  end
  for i = 1, #deltas do
    gone[#gone + 1] = 'q' .. i
  end
  redis.call('HDEL', pend, unpack(gone))
  return nil
end

-- fold_held of what `pend` holds now.
local function fold_pending(undo, pend, keys, precisions)
  return fold_held(undo, pend, keys, precisions, fold_read(pend), false)
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
  if FOLD_SUMS then
    -- Within SUM_SMALL, so that no fold can overflow (fold_sum_open).
    if #delta > SUM_SMALL or #cur[2] > SUM_SMALL then
      return false, nil
    end
    local r = redis.pcall('HINCRBY', pend, 'b', delta)
    if type(r) == 'table' and r.err then
      return true, r.err
    end
    undo[#undo + 1] = {pend, 'b', nil, delta, true}
    return true, nil
  end
  -- A statistic: the delta waits in the slice's queue when it can (the
  -- common write: no sketch decoded, one new field), else the queue and
  -- the delta are merged into b, in order.
  local head = cur[4]
  if head and stats_queue_takes(head, delta) then
    local n = fold_count(pend, cur)
    if n < STATS_QUEUE_DELTAS then
      n = n + 1
      undo[#undo + 1] = {pend, 'q' .. n, false}
      redis.call('HSET', pend, 'q' .. n, delta)
      return true, nil
    end
  end
  local d, err = stats_blob(delta, 'delta')
  if not d then
    return true, err.err
  end
  local b = fold_b(pend, cur)
  local q, deltas = fold_queue(pend, cur)
  local t
  t, err = stats_pending_value(b, q, deltas)
  if t then
    t, err = stats_merge_values(t, d)
  end
  if not t then
    return true, err.err
  end
  head = stats_queue_new(t)
  local new = stats_pack_pending(t)
  undo[#undo + 1] = {pend, 'b', b}
  fold_queue_undo(undo, pend, cur, q, deltas)
  local gone = {}
  for i = 1, #deltas do
    gone[i] = 'q' .. i
  end
  if q then
    gone[#gone + 1] = 'q'
  end
  if not head and cur[4] then
    gone[#gone + 1] = 'q0'
  end
  if #gone > 0 then
    redis.call('HDEL', pend, unpack(gone))
  end
  if head then
    redis.call('HSET', pend, 'b', new, 'q0', head)
  else
    redis.call('HSET', pend, 'b', new)
  end
  cur[2], cur[4] = new, head
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
local fold_open = not FOLD_SUMS and function(undo, pend, cur, keys, precisions, fields, delta)
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
  -- The new pending value: a sum's delta as sent (an integer Rust
  -- wrote), a statistic's blob checked, as format 3, with a queue (its
  -- header) when it may keep one.
  local checked, q = delta, false
  if not FOLD_SUMS then
    local d, err = stats_blob(delta, 'delta')
    if not d then
      return err.err
    end
    checked, q = stats_format(delta, 3), stats_queue_new(d)
  end
  local e = fold_held(undo, pend, keys, precisions, cur, true)
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
  if q then
    undo[#undo + 1] = {pend, 'q0', false}
    redis.call('HSET', pend, 's', f, 'b', checked, 't', table.concat(t, ' '), 'q0', q)
  else
    redis.call('HSET', pend, 's', f, 'b', checked, 't', table.concat(t, ' '))
  end
  return nil
end

-- Sums: writes `delta` to a series' m cells when fold_same did not take
-- it: the cells' hashes are KEYS[kbase + j] (KEYS[kbase] for all when n,
-- the hashes named, is 1), their precisions ARGV[pat + j], their fields
-- ARGV[at + j], for j from 0. Folds what the pending slice `pend` holds
-- (`cur` as for fold_same), adds `delta` to every precision's slice (exact:
-- HINCRBY says when it would overflow), and opens the pending slice at this
-- slice, at 0, for the writes to come: when one was held (the series is
-- busy) or this slice held something already. A series written once a
-- slice keeps no pending slice. Returns nil, what the coarsest slice holds
-- now (a number) and whether it opened the pending slice, or the error's
-- text and the failed cell's position from 0.
local fold_sum_open = FOLD_SUMS and function(undo, pend, cur, kbase, n, m, pat, at, delta)
  local one = n == 1 and 0 or 1
  if cur[1] then
    local keys, precisions = {}, {}
    for j = 0, m - 1 do
      keys[j + 1] = KEYS[kbase + one * j]
      precisions[j + 1] = ARGV[pat + j]
    end
    local e = fold_held(undo, pend, keys, precisions, cur)
    if e then
      return e
    end
  end
  local cells = {false, false, false, delta, false, false, false, false, kbase, one, at, 0}
  undo[#undo + 1] = cells
  local r, first, big = nil, nil, false
  for j = 0, m - 1 do
    r = redis.pcall('HINCRBY', KEYS[kbase + one * j], ARGV[at + j], delta)
    if type(r) == 'table' and r.err then
      return r.err, j
    end
    cells[12] = j + 1
    first = first or r
    if r >= SUM_OPEN or r <= -SUM_OPEN then
      big = true
    end
  end
  local opened = not big and (cur[1] or first ~= tonumber(delta))
  if opened then
    local t = {}
    for j = 0, m - 1 do
      t[j + 1] = ARGV[pat + j] .. ':' .. ARGV[at + j]
    end
    undo[#undo + 1] = {pend, 's', false}
    undo[#undo + 1] = {pend, 'b', false}
    undo[#undo + 1] = {pend, 't', false}
    redis.call('HSET', pend, 's', ARGV[at], 'b', '0', 't', table.concat(t, ' '))
  end
  return nil, r, opened
end

-- Sums: after a direct write left `r` (a number) in `field` of hash `key`
-- at `precision` (texts), checks that its sum with the series' pending value
-- still fits a 64-bit integer where that slice is one the pending slice
-- (`cur`, as for fold_same) folds into, so that its fold cannot overflow.
-- Exact near the limit (the stored value's text, added in a scratch field
-- of the pending slice by HINCRBY). nil, or the overflow's error text.
local fold_sum_check = FOLD_SUMS and function(pend, cur, key, precision, field, r)
  local b = cur[2]
  if not cur[1] or b == '0' then
    return nil
  end
  local tok = precision .. ':' .. field
  if not string.find(' ' .. cur[3] .. ' ', ' ' .. tok .. ' ', 1, true) then
    return nil
  end
  if math.abs(r) + math.abs(tonumber(b)) < 9e18 then
    return nil
  end
  redis.call('HSET', pend, '~', redis.call('HGET', key, field))
  local sum = redis.pcall('HINCRBY', pend, '~', b)
  redis.call('HDEL', pend, '~')
  if type(sum) == 'table' and sum.err then
    return sum.err
  end
  return nil
end

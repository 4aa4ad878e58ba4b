-- The statistics kind's merge, prepended to the scripts that write
-- statistics (engine/kinds/stats/ is its Rust twin and documents the
-- blob). A blob is the MessagePack array
--   [1, alpha, max_buckets, count, sum, sumsq, min, max, zeros,
--    pos_first, {pos count differences}, neg_first, {neg count differences}]
-- read and written with Redis's cmsgpack, so this file only adds up counts.
-- A pending slice's value (stats_fold.lua) is the same array with format 3
-- as its first element (2 as the commit before its queue had a field per
-- delta wrote it), so that an older Tally fails on it instead of missing
-- its queue, which is kept beside it (stats_queue_* below).
--
-- merge_stats(old, delta): old is the stored blob, or false when the slice
-- holds nothing; delta is a blob. Returns the merged blob, or an error
-- reply (a table with `err`, changing nothing):
--   "TALLY_OVERFLOW stats count"  the count would pass 2^53
--   "TALLY_OVERFLOW stats sum"    a sum would become infinite
--   "TALLY_FAILED stats <why>"    a blob that is not a statistic, or
--                                 sketches of different relative accuracy
-- The bucket bound travels in the blobs: the smaller of the two applies
-- (an empty value brings no settings). Each store keeps a window of at
-- most that many buckets: the positive store its highest indexes, the
-- negative store its lowest (values nearest zero); counts outside the
-- window are folded into its nearest end, exactly as the Rust merge does,
-- so both write the same bytes.
local TALLY_STATS_MAX_COUNT = 9007199254740992

-- A value read from a MessagePack array (format 1, or also 2 and 3 when
-- `pending`), or nil and the error reply naming `which`.
local function stats_table(t, which, pending)
  if type(t) ~= 'table' or #t ~= 13 or not (t[1] == 1 or (pending and (t[1] == 2 or t[1] == 3)))
      or type(t[11]) ~= 'table' or type(t[13]) ~= 'table' then
    return nil, redis.error_reply('TALLY_FAILED stats: the ' .. which .. ' is not a statistic')
  end
  return t
end

-- The value of a blob (format 1, or also 2 and 3 when `pending`), or nil and the
-- error reply.
local function stats_blob(blob, which, pending)
  local ok, t = pcall(cmsgpack.unpack, blob)
  if not ok then
    t = nil
  end
  return stats_table(t, which, pending)
end

-- The count of a store's last bucket: the sum of its differences.
local function stats_last_count(diffs)
  local c = 0
  for k = 1, #diffs do c = c + diffs[k] end
  return c
end

-- A store's absolute counts (first index, differences) as a list of the
-- counts of indexes lo..hi, each bucket outside folded into the nearest
-- end.
local function stats_counts_within(first, diffs, lo, hi)
  local counts = {}
  for k = 1, hi - lo + 1 do counts[k] = 0 end
  local c = 0
  for k = 1, #diffs do
    c = c + diffs[k]
    local i = first + k - 1
    if i < lo then i = lo elseif i > hi then i = hi end
    counts[i - lo + 1] = counts[i - lo + 1] + c
  end
  return counts
end

-- Counts (a list) as a store's differences.
local function stats_differences(counts)
  local out, previous = {}, 0
  for k = 1, #counts do
    out[k] = counts[k] - previous
    previous = counts[k]
  end
  return out
end

-- Folds a store's buckets outside [lo, hi] into the nearest end of that
-- window; returns its first index and differences (the same table when
-- nothing is outside).
local function stats_clip(first, diffs, lo, hi)
  local n = #diffs
  local last = first + n - 1
  if n == 0 or (first >= lo and last <= hi) then return first, diffs end
  local s = math.min(math.max(first, lo), hi)
  local e = math.min(math.max(last, lo), hi)
  return s, stats_differences(stats_counts_within(first, diffs, s, e))
end

-- Merges store b (first index, count differences) into store a under a
-- bound: past it, the window kept is the highest indexes (keep_high) or
-- the lowest, and each store's buckets outside are folded into the
-- window's nearest end first. Returns the first index and differences of
-- the result (a's table, changed in place, when it starts first).
-- Differences add up once aligned: only b's buckets are visited (plus a's
-- when the range grows past either end of a), so folding a small delta
-- into a large slice costs little.
local function stats_store(af, ad, bf, bd, bound, keep_high)
  local na, nb = #ad, #bd
  if na == 0 and nb == 0 then return 0, ad end
  local lo, hi
  if na == 0 then
    lo, hi = bf, bf + nb - 1
  elseif nb == 0 then
    lo, hi = af, af + na - 1
  else
    lo, hi = math.min(af, bf), math.max(af + na - 1, bf + nb - 1)
  end
  if hi - lo + 1 > bound then
    if keep_high then lo = hi - bound + 1 else hi = lo + bound - 1 end
    af, ad = stats_clip(af, ad, lo, hi)
    bf, bd = stats_clip(bf, bd, lo, hi)
    na, nb = #ad, #bd
  end
  if nb == 0 then return af, ad end
  if na == 0 then return bf, bd end
  local out = ad
  if af > lo then
    out = {}
    for k = 1, af - lo do out[k] = 0 end
    for k = 1, na do out[af - lo + k] = ad[k] end
  end
  -- A store ending before hi drops to zero after its last bucket.
  local a_end = af + na - lo
  if a_end < hi - lo + 1 then
    out[a_end + 1] = -stats_last_count(ad)
    for k = a_end + 2, hi - lo + 1 do out[k] = 0 end
  end
  local offset = bf - lo
  for k = 1, nb do out[offset + k] = out[offset + k] + bd[k] end
  local b_end = offset + nb
  if b_end < hi - lo + 1 then
    out[b_end + 1] = out[b_end + 1] - stats_last_count(bd)
  end
  return lo, out
end

-- Merges value d into value o (tables as stats_blob answers them; o's
-- bucket tables may be changed); the merged value (format 1), or nil and
-- the error reply, changing nothing.
local function stats_merge_values(o, d)
  if d[4] == 0 then return o end
  if o[4] == 0 then return d end
  if o[2] ~= d[2] then
    return nil, redis.error_reply('TALLY_FAILED stats: relative accuracy ' .. d[2]
      .. ' differs from the stored ' .. o[2])
  end
  -- Compared before adding: 2^53 + 1 is not a double.
  if d[4] > TALLY_STATS_MAX_COUNT - o[4] then
    return nil, redis.error_reply('TALLY_OVERFLOW stats count')
  end
  local count = o[4] + d[4]
  local sum, sumsq = o[5] + d[5], o[6] + d[6]
  if sum == math.huge or sum == -math.huge or sumsq == math.huge then
    return nil, redis.error_reply('TALLY_OVERFLOW stats sum')
  end
  local bound = math.min(o[3], d[3])
  local pf, pd = stats_store(o[10], o[11], d[10], d[11], bound, true)
  local nf, nd = stats_store(o[12], o[13], d[12], d[13], bound, false)
  return {1, o[2], bound, count, sum, sumsq, math.min(o[7], d[7]),
    math.max(o[8], d[8]), o[9] + d[9], pf, pd, nf, nd}
end

local function merge_stats(old, delta)
  local d, err = stats_blob(delta, 'delta')
  if not d then return err end
  if not old then return delta end
  local o
  o, err = stats_blob(old, 'stored value')
  if not o then return err end
  if d[4] == 0 then return old end
  if o[4] == 0 then return delta end
  local m
  m, err = stats_merge_values(o, d)
  if not m then return err end
  return cmsgpack.pack(m)
end

-- The queue of a pending slice (stats_fold.lua): the deltas written into
-- the slice since its value (`b`) was last merged, one hash field each,
-- `q1`, `q2`, ... in the order written, after `q0`, the
-- header: the MessagePack number of the value's relative accuracy. An
-- append is one HSET of a new field: nothing queued is copied. A delta
-- waits there, instead of being merged into `b` (an unpack, a merge and a
-- pack of a sketch of up to hundreds of buckets), only when its merge
-- cannot fail: its accuracy is the header's, its count at most
-- STATS_QUEUE_COUNT and its sums at most STATS_QUEUE_SUM in magnitude;
-- and a queue is kept (has its header) only while `b`'s count is at most
-- STATS_QUEUE_BASE and its sums at most STATS_QUEUE_SUM in magnitude. The
-- queue holds at most STATS_QUEUE_DELTAS deltas of at most
-- STATS_QUEUE_DELTA_BYTES bytes each: the value merged with all of them
-- stays below 2^53 (2^52 + 4,096 * 2^40) and far from infinite sums, as
-- every merge of them in order does. Any other write merges the queue and
-- the delta into `b` in order, as the merges one by one would have done.
--
-- A pending slice of format 2 (written before the queue had a field per
-- delta) keeps its queue in one field, `q`: the header, then its deltas
-- one after the other (a blob is one MessagePack value, so they need no
-- separator). It is read as it is, and the next write that merges turns
-- the slice into format 3.
local STATS_QUEUE_DELTAS = 256
local STATS_QUEUE_DELTA_BYTES = 512
local STATS_QUEUE_COUNT = 1099511627776 -- 2^40
local STATS_QUEUE_BASE = 4503599627370496 -- 2^52
local STATS_QUEUE_SUM = 1e300

-- True when value t may be a queue's base (or a delta in one, `delta`).
local function stats_queue_small(t, delta)
  return t[4] <= (delta and STATS_QUEUE_COUNT or STATS_QUEUE_BASE)
    and t[5] <= STATS_QUEUE_SUM and t[5] >= -STATS_QUEUE_SUM and t[6] <= STATS_QUEUE_SUM
end

-- A new queue's header for value t: '+' and the MessagePack number of its
-- accuracy, or '-' when t may keep no queue. (A header of the commit
-- before the accumulator, stats_fold.lua, was the number alone, or no q0
-- at all; it is read as it is. The sign keeps a Tally of that commit,
-- which appends where a delta's accuracy matches the whole header, from
-- appending to a slice whose hash also holds an accumulator it does not
-- know: it merges instead, and fails on the accumulator's fields.)
local function stats_queue_new(t)
  return stats_queue_small(t, false) and '+' .. cmsgpack.pack(t[2]) or '-'
end

-- True when the blob `delta` (format 1) may wait in the queue of header
-- `head` (false: the slice keeps none), room permitting (fewer than
-- STATS_QUEUE_DELTAS queued): see above.
local function stats_queue_takes(head, delta)
  if not head or #delta > STATS_QUEUE_DELTA_BYTES then
    return false
  end
  local sign = string.byte(head, 1)
  if sign == 45 then
    return false
  elseif sign == 43 then
    head = string.sub(head, 2)
  end
  -- The accuracy is a float (5 bytes) or a double (9); a delta's follows
  -- its array's first byte and its format's.
  if string.sub(delta, 3, 2 + #head) ~= head then
    return false
  end
  local d = stats_blob(delta, 'delta')
  return d ~= nil and d[4] >= 1 and stats_queue_small(d, true)
end

-- Adds to a store (first index af, differences ad) the counts `acc`
-- (absolute, by index) whose indexes span alo..ahi (nil: none), under
-- `bound`, keeping the highest indexes (keep_high) or the lowest: what
-- stats_store of each delta in turn gives. The window of one merge after
-- another is the one of the whole range at the smallest bound (the range
-- only grows and the bound only shrinks, so a count folded into an end is
-- folded into the final end anyway), so the counts are added once and
-- clipped once. Returns the first index and differences (ad, changed in
-- place, when the range stays ad's).
local function stats_store_add(af, ad, acc, alo, ahi, bound, keep_high)
  local na = #ad
  local lo, hi
  if na == 0 and not alo then
    return 0, ad
  elseif na == 0 then
    lo, hi = alo, ahi
  elseif not alo then
    lo, hi = af, af + na - 1
  else
    lo, hi = math.min(af, alo), math.max(af + na - 1, ahi)
  end
  if hi - lo + 1 > bound then
    if keep_high then lo = hi - bound + 1 else hi = lo + bound - 1 end
  elseif na > 0 and lo == af and hi == af + na - 1 then
    -- Within ad's range: a count c at i adds c to difference i and takes
    -- it from difference i + 1.
    for i, c in pairs(acc) do
      local j = i - af + 1
      ad[j] = ad[j] + c
      if j < na then
        ad[j + 1] = ad[j + 1] - c
      end
    end
    return af, ad
  end
  local counts = stats_counts_within(af, ad, lo, hi)
  for i, n in pairs(acc) do
    if i < lo then i = lo elseif i > hi then i = hi end
    counts[i - lo + 1] = counts[i - lo + 1] + n
  end
  return lo, stats_differences(counts)
end

-- Adds a store's absolute counts (first index f, differences diffs) to
-- `acc`; returns the range of indexes seen, lo..hi, grown by the store's.
local function stats_store_take(acc, f, diffs, lo, hi)
  local n = #diffs
  if n == 0 then
    return lo, hi
  end
  local c = 0
  for j = 1, n do
    c = c + diffs[j]
    if c ~= 0 then
      local i = f + j - 1
      acc[i] = (acc[i] or 0) + c
    end
  end
  if not lo then
    return f, f + n - 1
  end
  return math.min(lo, f), math.max(hi, f + n - 1)
end

-- Merges into value o the values unpacked in `all` (what pcall of
-- cmsgpack.unpack answered) from its element `first` on, in order; the
-- merged value or nil and the error reply. The bytes are those of
-- stats_merge_values of each in turn, and so are the errors (checked in
-- the same order with the same running totals), but nothing is made per
-- delta: the moments add up in o, the buckets in one table per store,
-- merged into o's stores once at the end (stats_store_add).
local function stats_merge_unpacked(o, all, first)
  if not all[1] then
    return nil, redis.error_reply('TALLY_FAILED stats: the pending queue is not a statistic')
  end
  local pos, neg, plo, phi, nlo, nhi = {}, {}, nil, nil, nil, nil
  local merged = false
  for k = first, #all do
    local d, err = stats_table(all[k], 'pending queue')
    if not d then return nil, err end
    if o[4] == 0 then
      -- (Before anything is added up: an empty value takes the delta.)
      o = stats_merge_values(o, d)
    elseif d[4] > 0 then
      if o[2] ~= d[2] or d[4] > TALLY_STATS_MAX_COUNT - o[4] then
        return stats_merge_values(o, d)
      end
      local sum, sumsq = o[5] + d[5], o[6] + d[6]
      if sum == math.huge or sum == -math.huge or sumsq == math.huge then
        return nil, redis.error_reply('TALLY_OVERFLOW stats sum')
      end
      o[3], o[4], o[5], o[6] = math.min(o[3], d[3]), o[4] + d[4], sum, sumsq
      o[7], o[8], o[9] = math.min(o[7], d[7]), math.max(o[8], d[8]), o[9] + d[9]
      plo, phi = stats_store_take(pos, d[10], d[11], plo, phi)
      nlo, nhi = stats_store_take(neg, d[12], d[13], nlo, nhi)
      merged = true
    end
  end
  if merged then
    o[1] = 1
    o[10], o[11] = stats_store_add(o[10], o[11], pos, plo, phi, o[3], true)
    o[12], o[13] = stats_store_add(o[12], o[13], neg, nlo, nhi, o[3], false)
  end
  return o
end

-- The value of a pending slice: its blob `b` (format 1, 2 or 3) with the
-- deltas of a format 2 queue `q` (false or nil: none) and then the blobs
-- of `deltas` (a list of q1, q2, ..., or nil) merged in, in order, as a
-- table; or nil and the error reply. The deltas are unpacked at once (one
-- cmsgpack call), and each merge reuses the value's bucket tables.
local function stats_pending_value(b, q, deltas)
  local o, err = stats_blob(b, 'stored value', true)
  if o and q and #q > 9 then
    -- (Its first value is the header.)
    o, err = stats_merge_unpacked(o, {pcall(cmsgpack.unpack, q)}, 3)
  end
  if o and deltas and #deltas > 0 then
    for k = 1, #deltas do
      if not deltas[k] then
        return nil, redis.error_reply('TALLY_FAILED stats: the pending queue misses q' .. k)
      end
    end
    local all = {pcall(cmsgpack.unpack, table.concat(deltas))}
    if all[1] and #all ~= #deltas + 1 then
      -- (A field that held no value, or several.)
      all = {false}
    end
    o, err = stats_merge_unpacked(o, all, 2)
  end
  return o, err
end

-- A blob of format 1, 2 or 3 as one of `format`. Formats 1 and 2 start
-- with MessagePack's one-byte header of an array of 13 (0x9d), then the
-- format; format 3 with the three-byte header of the same array (0xdc 0x00
-- 0x0d), so that a Tally of format 2, which rewrites the format byte of a
-- 0x9d blob without decoding it, decodes this one and fails on it.
local function stats_format(blob, format)
  local body
  local c = string.byte(blob, 1)
  if c == 0x9d then
    body = string.sub(blob, 3)
  elseif c == 0xdc and string.sub(blob, 2, 3) == '\0\13' then
    body = string.sub(blob, 5)
  else
    -- (Not a blob this code writes: as it is when it is no statistic, for
    -- the merge that takes it to say so.)
    local t = stats_blob(blob, 'stored value', true)
    if not t then
      return blob
    end
    body = string.sub(cmsgpack.pack(t), 3)
  end
  if format == 3 then
    return '\220\0\13\3' .. body
  end
  return '\157' .. string.char(format) .. body
end

-- Value t packed as a pending slice's blob (format 3).
local function stats_pack_pending(t)
  t[1] = 3
  return stats_format(cmsgpack.pack(t), 3)
end

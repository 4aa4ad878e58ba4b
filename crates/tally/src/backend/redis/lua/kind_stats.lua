-- The statistics kind's merge, prepended to the scripts that write
-- statistics (engine/kinds/stats/ is its Rust twin and documents the
-- blob). A blob is the MessagePack array
--   [1, alpha, max_buckets, count, sum, sumsq, min, max, zeros,
--    pos_first, {pos count differences}, neg_first, {neg count differences}]
-- read and written with Redis's cmsgpack, so this file only adds up counts.
-- A pending slice's value (stats_fold.lua) is the same array with format 2
-- as its first element, so that a Tally from before its queue (which
-- accepts format 1 only) fails on it instead of missing the queue; its
-- queue is kept beside it (stats_queue_* below).
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

-- A value read from a MessagePack array (format 1, or also 2 when
-- `pending`), or nil and the error reply naming `which`.
local function stats_table(t, which, pending)
  if type(t) ~= 'table' or #t ~= 13 or not (t[1] == 1 or (pending and t[1] == 2))
      or type(t[11]) ~= 'table' or type(t[13]) ~= 'table' then
    return nil, redis.error_reply('TALLY_FAILED stats: the ' .. which .. ' is not a statistic')
  end
  return t
end

-- The value of a blob (format 1, or also 2 when `pending`), or nil and the
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

-- Folds a store's buckets outside [lo, hi] into the nearest end of that
-- window; returns its first index and differences (the same table when
-- nothing is outside).
local function stats_clip(first, diffs, lo, hi)
  local n = #diffs
  local last = first + n - 1
  if n == 0 or (first >= lo and last <= hi) then return first, diffs end
  local s = math.min(math.max(first, lo), hi)
  local e = math.min(math.max(last, lo), hi)
  local counts = {}
  for k = 1, e - s + 1 do counts[k] = 0 end
  local c = 0
  for k = 1, n do
    c = c + diffs[k]
    local i = first + k - 1
    if i < s then i = s elseif i > e then i = e end
    counts[i - s + 1] = counts[i - s + 1] + c
  end
  local out, previous = {}, 0
  for k = 1, #counts do
    out[k] = counts[k] - previous
    previous = counts[k]
  end
  return s, out
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

-- The queue of a pending slice (stats_fold.lua's field `q`): the deltas
-- written into the slice since its value (`b`) was last merged, each
-- appended as it came (a blob is one MessagePack value, so they need no
-- separator), after a header, the MessagePack number of the value's
-- relative accuracy. A delta waits there, instead of being merged into `b`
-- (an unpack, a merge and a pack of a sketch of up to hundreds of buckets),
-- only when its merge cannot fail: its accuracy is the header's, its count
-- at most STATS_QUEUE_COUNT and its sums at most STATS_QUEUE_SUM in
-- magnitude; and a queue is kept (has its header) only while `b`'s count is
-- at most STATS_QUEUE_BASE and its sums at most STATS_QUEUE_SUM in
-- magnitude. The queue holds at most STATS_QUEUE_BYTES bytes, so at most
-- a few hundred deltas (a blob has at least 14 bytes): the value merged
-- with all of them stays below 2^53 and far from infinite sums, as every
-- merge of them in order does. Any other write merges the queue and the
-- delta into `b` in order, as the merges one by one would have done.
local STATS_QUEUE_BYTES = 2048
local STATS_QUEUE_COUNT = 1099511627776 -- 2^40
local STATS_QUEUE_BASE = 4503599627370496 -- 2^52
local STATS_QUEUE_SUM = 1e300

-- True when value t may be a queue's base (or a delta in one, `delta`).
local function stats_queue_small(t, delta)
  return t[4] <= (delta and STATS_QUEUE_COUNT or STATS_QUEUE_BASE)
    and t[5] <= STATS_QUEUE_SUM and t[5] >= -STATS_QUEUE_SUM and t[6] <= STATS_QUEUE_SUM
end

-- A new queue for value t (its header), or false when t may not have one.
local function stats_queue_new(t)
  return stats_queue_small(t, false) and cmsgpack.pack(t[2])
end

-- True when the blob `delta` (format 1) may wait in queue `q` (false: the
-- slice keeps none): see above.
local function stats_queue_takes(q, delta)
  if not q or #q + #delta > STATS_QUEUE_BYTES then
    return false
  end
  -- The header is a float (5 bytes) or a double (9); a delta's accuracy
  -- follows its array's first byte and its format's.
  local n = string.byte(q, 1) == 0xcb and 9 or 5
  if string.sub(delta, 3, 2 + n) ~= string.sub(q, 1, n) then
    return false
  end
  local d = stats_blob(delta, 'delta')
  return d ~= nil and d[4] >= 1 and stats_queue_small(d, true)
end

-- True when queue `q` (false or nil: none) holds no delta: at most its
-- header.
local function stats_queue_empty(q)
  return not q or #q <= 9
end

-- The value of a pending slice: its blob `b` (format 1 or 2) with the
-- deltas of its queue `q` (false or nil: none) merged in, in order, as a
-- table; or nil and the error reply.
local function stats_pending_value(b, q)
  local o, err = stats_blob(b, 'stored value', true)
  if not o or stats_queue_empty(q) then
    return o, err
  end
  local all = {pcall(cmsgpack.unpack, q)}
  if not all[1] then
    return nil, redis.error_reply('TALLY_FAILED stats: the pending queue is not a statistic')
  end
  -- all[2] is the header.
  for k = 3, #all do
    local d
    d, err = stats_table(all[k], 'pending queue')
    if not d then return nil, err end
    o, err = stats_merge_values(o, d)
    if not o then return nil, err end
  end
  return o
end

-- A blob of format 1 as one of format 2, or the other way round (`format`
-- the one wanted): only its second byte differs (an array of 13 starts
-- with 0x9d, then the format).
local function stats_format(blob, format)
  if string.byte(blob, 1) == 0x9d then
    return '\157' .. string.char(format) .. string.sub(blob, 3)
  end
  -- (Not a blob this code writes: as it is when it is no statistic, for
  -- the merge that takes it to say so.)
  local t = stats_blob(blob, 'stored value', true)
  if not t then
    return blob
  end
  t[1] = format
  return cmsgpack.pack(t)
end

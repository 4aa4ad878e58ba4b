-- engine_apply.lua: merges slice deltas of one space into its series'
-- hashes and registers the series, all or nothing. Every space and every
-- key layout uses it.
--
-- Its first part, up to the line "-- End of the protocol.", reads the
-- call's KEYS and ARGV, which engine/protocol.rs writes (the one place
-- that does; its tests run this part, cut from this file, against what it
-- builds).
--
-- KEYS: the writer lane's record (when the header says so), then the h
-- series hashes (one per series and precision; per series, precision and
-- chunk in the expiring layout; one per series in the compact layout, but
-- for gauges, whose runs name it once per precision), then the registries
-- (in the expiring layout each followed by its `ends@e`), each in the
-- order ARGV lists them; then gauges' current-value keys, or in a write
-- through pending slices the series' pending slices, one per series in the
-- order of the series' entries; then a kind's scratch keys (sets: two),
-- last (sums have none: their pending slices end KEYS).
-- ARGV[1]  '1' when KEYS[1] is the writer lane's record, else '0'; '3' and
--          '2' say the same for the expiring layout, '5' and '4' for a write
--          through pending slices (stats_fold.lua), '7' and '6' for a
--          write of sums in a layout that keeps pending slices, not
--          through them (a space of few precisions; see CHECK below)
-- ARGV[2]  the write's sequence number in its lane
-- ARGV[3]  the space's kind code: '1' for sums, else a key of KIND_MERGE
-- ARGV[4]  h, the number of hashes
-- then per hash: m, then m pairs of field (slice start; in the compact
-- layout `(precision << 32) | slice index`, all the same here) and delta;
-- then per registry to the end: m, then m pairs of member and the KEYS
-- index of the hash that vouches for it (a hash of the member's series
-- that exists only while the member is registered).
-- Gauges (kind '5') put three more before each hash's m: the KEYS index of
-- the gauge's current-value key (after the registries), the hash's
-- precision, and the seconds that key lives (0: for ever).
-- A write through pending slices ('4', '5') puts before them ARGV[5], np,
-- and the space's np precisions (finest first), then has entries instead
-- of hashes, until h hashes are named. A series' hashes written directly
-- (every precision at once) are one entry: '0', the KEYS index of its
-- series' pending slice when a direct write must check its sums against it
-- (sums; else 0), n, the number of its hashes, their precisions as a mask
-- (bit b for the space's b-th precision, one bit per hash in the hashes'
-- order; 0 in the compact layout, whose fields say theirs: `(precision <<
-- 32) | index`), then per hash m and its pairs as above. A series
-- written through its pending slice (one cell per precision, in their
-- order, all with one delta) is one entry for all its hashes, its delta
-- sent once: the KEYS index of its pending slice (after the registries),
-- n, the number of hashes it names (one per precision; 1 in the compact
-- layout, whose one hash holds every cell), the delta, then np fields, one
-- per precision.
-- The expiring layout instead has, after the hashes: the `ends@e` score
-- below which a series has expired (for pruning), then per registry to the
-- end: n, then per series its name, end score, '1' if it must set its
-- chunks' expiry (else '0'), k, and k quads of hash KEYS index, seconds
-- to live, and the marks of the finest chunks the hash's chunk holds (the
-- first, modulo NO_MARK, and how many; 0 0 when marks cannot tell).
--
-- No table or closure is made here but DIGITS: this runs for every exact
-- increment.

-- A count of pairs, hashes or members, or a sum's delta (usually one
-- digit): a digit's value from DIGITS, as tonumber (Lua's strtod) costs
-- about as much as a command here; tonumber for the rest.
local DIGITS = {['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4,
  ['5'] = 5, ['6'] = 6, ['7'] = 7, ['8'] = 8, ['9'] = 9}
local function count(s)
  return DIGITS[s] or tonumber(s)
end

-- The header: 1 when KEYS[1] is the writer lane's record (else 0), true in
-- the expiring layout, true for a write through pending slices, the
-- sequence number and the kind's code (texts), h, the ARGV index of the
-- first hash, and true for sums whose series may keep a pending slice
-- that this write does not go through ('6', '7').
local function apply_header()
  local flag = ARGV[1]
  local pending = flag == '4' or flag == '5'
  return (flag == '1' or flag == '3' or flag == '5' or flag == '7') and 1 or 0,
    flag == '2' or flag == '3', pending, ARGV[2], ARGV[3], tonumber(ARGV[4]),
    pending and 6 + tonumber(ARGV[5]) or 5, flag == '6' or flag == '7'
end

-- A write through pending slices: the number of the space's precisions,
-- and the ARGV index of the first (texts, finest first: ARGV[at + j] for j
-- from 0).
local function apply_precisions()
  return tonumber(ARGV[5]), 6
end

-- A write through pending slices: the entry whose ARGV start at `at` (`np`:
-- the space's number of precisions): the KEYS index of its series' pending
-- slice (0: hashes written directly), the number of hashes it names, then
-- for a pending slice's entry nil, its number of cells (np), its delta and
-- the index of its first field (one per precision, in the precisions'
-- order); for hashes written directly the mask of their precisions (text:
-- apply_direct_precision reads it), nil, the KEYS index of the pending
-- slice their sums are checked against (0 for none) and the index of the
-- first hash (apply_direct_hash).
local function apply_pending_entry(at, np)
  if ARGV[at] == '0' then
    return 0, count(ARGV[at + 2]), ARGV[at + 3], nil, tonumber(ARGV[at + 1]), at + 4
  end
  return tonumber(ARGV[at]), tonumber(ARGV[at + 1]), nil, np, ARGV[at + 2], at + 3
end

-- The precision (text) of hash i (from 0) of an entry of hashes written
-- directly whose mask is `mask` (`pat`: the index of the space's first
-- precision, apply_precisions): '0' for a mask of 0 (the compact layout).
-- Only a sum checked against a pending count asks.
local function apply_direct_precision(mask, i, pat)
  local bits, b = tonumber(mask), 0
  if bits == 0 then
    return '0'
  end
  while true do
    if bits % 2 == 1 then
      if i == 0 then
        return ARGV[pat + b]
      end
      i = i - 1
    end
    bits, b = (bits - bits % 2) / 2, b + 1
  end
end

-- A hash written directly whose ARGV start at `at`: m, and the index of
-- its first (field, delta) pair (pair j at first + 2j); the next hash
-- starts after its m pairs.
local function apply_direct_hash(at)
  return count(ARGV[at]), at + 1
end

-- The hash whose ARGV start at `at`: for gauges, its current-value key's
-- KEYS index, its run (that index and the precision, as one text) and
-- the seconds that key lives (nils otherwise); then m, and the index of
-- its first (field, delta) pair (pair j at first + 2j).
local function apply_hash(at, gauge)
  if gauge then
    return tonumber(ARGV[at]), ARGV[at] .. ' ' .. ARGV[at + 1], tonumber(ARGV[at + 2]),
      count(ARGV[at + 3]), at + 4
  end
  return nil, nil, nil, count(ARGV[at]), at + 1
end

-- The registry whose ARGV start at `at` (layouts without `ends@e`): m, the
-- index of its first member (member j and the KEYS index of the hash
-- vouching for it: apply_member), and the index after its members.
local function apply_members(at)
  local m = tonumber(ARGV[at])
  return m, at + 1, at + 1 + 2 * m
end

-- Member j (from 0) of the registry whose members start at `first`: the
-- member and the KEYS index of the hash that vouches for it.
local function apply_member(first, j)
  return ARGV[first + 2 * j], tonumber(ARGV[first + 2 * j + 1])
end

-- The expiring layout's tail at `at`: the score below which a series has
-- expired (text and number), and the index of its first registry.
local function apply_below(at)
  return ARGV[at], tonumber(ARGV[at]), at + 1
end

-- The expiring layout's registry whose ARGV start at `at`: n, its number
-- of series, and the index of its first (apply_series).
local function apply_registry(at)
  return tonumber(ARGV[at]), at + 1
end

-- The expiring layout's series whose ARGV start at `at`: its name, end
-- score (text and number), whether it must set its chunks' expiry, k, the
-- index of its first quad (quad j at first + 4j: apply_chunk), and the
-- index after it.
local function apply_series(at)
  local k = tonumber(ARGV[at + 3])
  return ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 1]), ARGV[at + 2] == '1', k,
    at + 4, at + 4 + 4 * k
end

-- The quad at `q`: the hash's KEYS index, its seconds to live (text), the
-- first mark and how many.
local function apply_chunk(q)
  return tonumber(ARGV[q]), ARGV[q + 1], tonumber(ARGV[q + 2]), tonumber(ARGV[q + 3])
end
-- End of the protocol.

-- Gauges (kind '5'): each precision's cells run, in slice order, from
-- the current value as the call found it (a slice holding something runs
-- from its own last value: merge_gauge); once everything merged, the key
-- is set to the value after the gauge's last operation (it is not taken
-- back: it is written last).
-- In the expiring layout, a series whose stored end score equals this
-- write's (and no must) wrote only into chunks that a write with the same
-- score created and gave their expiry: nothing more to do, one ZSCORE as
-- the other layouts' ZADD.
-- Otherwise its chunks get their expiry, except (no must) those the stored
-- score vouches for (its data has not all expired and its mark is one of the
-- chunk's finest chunks: the write that stored it wrote the chunk and
-- gave it its expiry), and its end score raised; a series new (or back
-- after its data expired) is registered, and then series that expired
-- are pruned.
--
-- Sums keep the tight loop counters always had: each hash's key is read
-- once and no number is parsed but the counts (usually '1'), which matters
-- at a million HINCRBY a second; a new hash of several fields is one HSET.
-- Blob kinds read each field (HGET), merge
-- with their kind's function (prepended: engine_kinds.lua) and write it
-- back (HSET). Operations are numbered from 0 in ARGV order.
--
-- Returns 1 when written (2 for a call of one counter whose pending slice
-- is then at the write's slice, see sum_short.lua), 0 when the lane's
-- record already holds this sequence number or a later one (a replayed
-- write: nothing is merged).
-- The record is set to the number, with a 7-day expiry, only when the
-- write succeeds. If a merge fails (overflow, wrong type, a blob of another
-- kind), every merge already done is taken back (sums by subtraction,
-- blobs by restoring the value they held) and the error
-- "TALLY_OVERFLOW <op> ..." or "TALLY_FAILED <op> <message>" is returned.
local marker, expiring, pending, seq, kind, h, first, check = apply_header()
if marker == 1 then
  local last = tonumber(redis.call('GET', KEYS[1]) or '0')
  if tonumber(seq) <= last then
    return 0
  end
end

local gauge = kind == '5'
local merge = nil
if kind ~= '1' then
  merge = KIND_MERGE[tonumber(kind)]
  if not merge then
    return redis.error_reply('TALLY_FAILED 0 no merge function for kind ' .. kind)
  end
end

-- Sums: per hash k (from 1, in KEYS order) whether it held something
-- before its turn in this call (the HINCRBY of its last field answered
-- other than its delta), set for every hash in order (the table's array
-- part) through pending slices; false without asking for a hash written
-- directly that vouches for no member (all but a series' last in the
-- default layout). Without pending slices only a hash that held something
-- is set (nil is false): a call of new counters grows no table, and a
-- call of busy ones paid 3 % for the falses. A member such a hash vouches
-- for is registered already (or by this call, when a series comes
-- twice): no ZADD for it.
local held = {}
-- Sums: the pending slices the call may read are KEYS[lo] to KEYS[#KEYS]
-- (one per series, last in KEYS, in the entries' order), looked up
-- EXISTS_KEYS at a time before the first entry (one EXISTS each) rather
-- than one HMGET per series: `clear[c]` is true when none of the c-th such
-- run (from 0) existed when the call began, so that its series read their
-- pending slice only when this call opened it (`opened`, by key: a
-- series written twice in a call has two KEYS indexes). A counter
-- written once a slice, the common write of many distinct counters, has
-- none. Reading the rest, a run where one exists, costs what it did. A
-- call of fewer than EXISTS_MIN series (on a cluster, where a call holds a
-- slot's, often one or two) reads each as before, with nothing made for
-- the look-up (`clear` nil): a look-up would save little there, and cost
-- a command more where the series are busy. NO_PENDING is what fold_read
-- answers for a slice that does not exist (fold_held, the one function
-- that changes it, never runs for it).
local EXISTS_KEYS, EXISTS_MIN = 32, 8
local clear, opened, lo, NO_PENDING = nil, nil, 0, nil

-- Sums: a hash written with at least NEW_HASH_MIN fields is first looked
-- up, and made with one HSET when it does not exist (up to NEW_HASH_MAX
-- fields, within what unpack and one command take comfortably). Below
-- that, HINCRBY per field is as cheap as the lookup.
local NEW_HASH_MIN, NEW_HASH_MAX = 3, 500

-- Sums in a write with `check`: a count this far from 0 is checked against
-- its series' pending count (stats_fold.lua's rule for opening one), by
-- sending the call again through the pending slices; CHECK is the error
-- that asks for it.
local SUM_BIG, CHECK = 9e17, 'TALLY_CHECK'

-- Sums: adds the m (field, delta) pairs from ARGV[at] to hash `key`: a hash
-- that does not exist yet, of NEW_HASH_MIN to NEW_HASH_MAX fields (in the
-- compact layout, a series' first write: a field per precision), with one
-- HSET (its values are the deltas, as HINCRBY would leave them), else one
-- HINCRBY each. With `cur` (what HMGET answered of the series' pending
-- slice `pend`; `hp` the hash's precision), each sum is checked against its
-- pending count (fold_sum_check). Returns the ARGV index after the pairs
-- added, whether the hash held a count before (its last HINCRBY answered
-- other than its delta: count, no tonumber for the usual '1'), whether one
-- HSET made it, how many pairs were added, and the failed pair's position
-- from 0 and its error (nils when none failed).
local function add_sums(key, at, m, pend, cur, hp)
  if m >= NEW_HASH_MIN and m <= NEW_HASH_MAX and redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, unpack(ARGV, at, at + 2 * m - 1))
    for j = 0, cur and m - 1 or -1 do
      local e = fold_sum_check(pend, cur, key, hp, ARGV[at + 2 * j], tonumber(ARGV[at + 2 * j + 1]))
      if e then
        return at + 2 * m, false, true, m, j, e
      end
    end
    return at + 2 * m, false, true, m, nil, nil
  end
  local r
  for j = 0, m - 1 do
    r = redis.pcall('HINCRBY', key, ARGV[at], ARGV[at + 1])
    if type(r) == 'table' and r.err then
      return at, false, false, j, j, r.err
    end
    at = at + 2
    local e = cur and fold_sum_check(pend, cur, key, hp, ARGV[at - 2], r)
    if e then
      return at, false, false, j + 1, j, e
    end
  end
  return at, m > 0 and r ~= count(ARGV[at - 1]), false, m, nil, nil
end

-- The first operation that failed (0-based) and its error. No closure or
-- table but `held` is made on the way for sums: this runs for every exact
-- increment.
local failed, err = nil, nil
-- Blob kinds: the value each operation found (false: none), to restore.
local saved = nil
-- Writes through pending slices: every change, to take back; and apart,
-- the runs of a series' hashes written directly, each added to in full, as
-- flat triples (the ARGV index of the run's first hash, its KEYS index,
-- how many hashes; nruns entries): a table per run cost Redis as much as
-- two of its HINCRBYs.
local undo, runs, nruns = nil, nil, 0
local at, op = first, 0
-- What a call that writes answers: 1, or 2 for a call of one counter
-- whose pending slice is at the write's slice afterwards (sum_short.lua).
local written = 1
if pending then
  -- Statistics and sums (stats_fold.lua): a series with a pending slice is
  -- one entry; the common write (its finest slice pending) reads only its
  -- first pair. Sums keep `held` (a series found holding a count is
  -- registered: no ZADD).
  undo, runs = {}, {}
  local checked = {}
  local np, pat = apply_precisions()
  -- A series has a hash at least: h below EXISTS_MIN means fewer series,
  -- and then not even the first entry is read for the look-up.
  if FOLD_SUMS and h >= EXISTS_MIN then
    -- The first entry names the first series' pending slice: its own, or
    -- (written directly) the one its sums are checked against.
    local pend, _, _, _, delta = apply_pending_entry(at, np)
    lo = pend == 0 and delta or pend
    if #KEYS - lo + 1 >= EXISTS_MIN then
      clear, opened, NO_PENDING = {}, {}, {false, false, false}
      local from, c = lo, 0
      while from <= #KEYS do
        local to = math.min(from + EXISTS_KEYS - 1, #KEYS)
        clear[c] = redis.call('EXISTS', unpack(KEYS, from, to)) == 0
        from, c = to + 1, c + 1
      end
    end
  end
  local k = 1
  while k <= h and not failed do
    local pend, n, mask, m, delta, pairs_at = apply_pending_entry(at, np)
    if pend == 0 and FOLD_SUMS then
      -- Sums written directly: the loop of the other layouts (a new hash of
      -- several fields is one HSET), each sum checked against the series'
      -- pending count where it has one. A run of the series' hashes each
      -- added to in full (from hash `first`, its ARGV at `first_at`) is one
      -- triple in `runs`, taken back by reading their ARGV again; a hash
      -- made by one HSET, or where a sum failed, is a record of its own in
      -- `undo` and ends the run. Without a pending count, a hash's pairs
      -- are added here, not by add_sums: a function call per hash costs
      -- Redis as much as its HINCRBY (the common write of many distinct
      -- counters).
      local cur = nil
      if delta > 0 and not (clear and clear[math.floor((delta - lo) / EXISTS_KEYS)]
          and not opened[KEYS[delta]]) then
        cur = checked[delta] or redis.call('HMGET', KEYS[delta], 's', 'b', 't')
        checked[delta] = cur
        if not cur[1] or cur[2] == '0' then
          cur = nil
        end
      end
      local first, first_at = 0, pairs_at
      at = pairs_at
      for i = 0, n - 1 do
        local key = KEYS[marker + k + i]
        local made, done, j, e = false, 0, nil, nil
        m, pairs_at = apply_direct_hash(at)
        if cur or (m >= NEW_HASH_MIN and m <= NEW_HASH_MAX) then
          at, held[k + i], made, done, j, e = add_sums(key, pairs_at, m, cur and KEYS[delta], cur,
            cur and apply_direct_precision(mask, i, pat))
        else
          local r = nil
          at = pairs_at
          -- (`check` is never set on this route.)
          -- @sum_incr.lua
          -- Only a series' last hash vouches for its member here (the
          -- default layout's): the others' count is not parsed.
          held[k + i] = i == n - 1 and m > 0 and r ~= count(ARGV[at - 1])
        end
        if made or e then
          -- The run before this hash, then this hash.
          if i > first then
            runs[nruns + 1], runs[nruns + 2], runs[nruns + 3] = first_at, marker + k + first, i - first
            nruns = nruns + 3
          end
          undo[#undo + 1] = {key, false, false, false, false, pairs_at, done, made}
          first, first_at = i + 1, at
        end
        if e then
          failed, err = op + j, e
          break
        end
        op = op + m
      end
      if not failed and n > first then
        runs[nruns + 1], runs[nruns + 2], runs[nruns + 3] = first_at, marker + k + first, n - first
        nruns = nruns + 3
      end
    elseif pend == 0 then
      at = pairs_at
      for i = 0, n - 1 do
        local key = KEYS[marker + k + i]
        m, at = apply_direct_hash(at)
        for _ = 1, m do
          local e = fold_merge(undo, key, ARGV[at], ARGV[at + 1])
          if e then
            failed, err = op, e
            break
          end
          at, op = at + 2, op + 1
        end
        if failed then break end
      end
    else
      local p, f = ARGV[pat], ARGV[pairs_at]
      local cur = nil
      if clear and clear[math.floor((pend - lo) / EXISTS_KEYS)] and not opened[KEYS[pend]] then
        cur = NO_PENDING
      else
        cur = fold_read(KEYS[pend])
      end
      local same, e = fold_same(undo, KEYS[pend], cur, p, f, delta)
      local cell = nil
      if same and FOLD_SUMS then
        -- A pending slice exists only while its series is registered.
        held[k + n - 1] = true
        if n == h then written = 2 end
      elseif not same and not e and FOLD_SUMS then
        local r, made
        e, r, made = fold_sum_open(undo, KEYS[pend], cur, marker + k, n, m, pat, pairs_at, delta)
        if e then
          -- The cell that overflowed, when it was one of the write's.
          cell = r
        else
          held[k + n - 1] = r ~= count(delta)
          if made then
            if opened then opened[KEYS[pend]] = true end
            if n == h then written = 2 end
          end
        end
      elseif not same and not e then
        local keys, precisions, fields = {}, {}, {}
        for j = 0, m - 1 do
          keys[j + 1] = KEYS[marker + k + (n == 1 and 0 or j)]
          precisions[j + 1] = ARGV[pat + j]
          fields[j + 1] = ARGV[pairs_at + j]
        end
        e = fold_open(undo, KEYS[pend], cur, keys, precisions, fields, delta)
      end
      if e then
        failed, err = op + (cell or 0), e
      end
      at, op = pairs_at + m, op + m
    end
    k = k + n
  end
elseif not merge then
  -- Sums without pending slices: each hash's pairs added here (a function
  -- call per hash costs Redis about as much as its HINCRBY), a new hash of
  -- NEW_HASH_MIN fields or more by add_sums. With `check` (a series that
  -- may keep a pending slice from a setting of more precisions, which no
  -- write here is checked against), a count that passes SUM_BIG in
  -- magnitude stops the call: it is taken back whole, and answered CHECK
  -- for the client to send it again through the pending slices, whose
  -- direct entries check each sum against its series' pending count.
  for k = 1, h do
    local key = KEYS[marker + k]
    -- count() inline here and below: two function calls a hash cost 2 %.
    local m, j, e, _ = DIGITS[ARGV[at]] or tonumber(ARGV[at]), nil, nil, nil
    if not check and m >= NEW_HASH_MIN and m <= NEW_HASH_MAX then
      at, held[k], _, _, j, e = add_sums(key, at + 1, m, nil, nil, nil)
    else
      local r, done = nil, 0
      at = at + 1
      -- @sum_incr.lua
      if m > 0 and r ~= (DIGITS[ARGV[at - 1]] or tonumber(ARGV[at - 1])) then
        held[k] = true
      end
    end
    -- On a failure, op stops at the cell that failed (after the one that
    -- passed SUM_BIG).
    op = op + (e and j or m)
    if e then
      failed, err = op, e
      break
    end
  end
else
  saved = {}
  -- Gauges: the current value each key held, the value after each gauge's
  -- last operation, its key's time to live; the run (key and precision)
  -- being merged and its value.
  local starts, finals, lives, run, cur = {}, {}, {}, nil, nil
  for k = 1, h do
    local key = KEYS[marker + k]
    local ck, this, life, m, pairs_at = apply_hash(at, gauge)
    if ck then
      if starts[ck] == nil then
        starts[ck] = tonumber(redis.call('GET', KEYS[ck]) or '0') or 0
      end
      if this ~= run then
        run, cur = this, starts[ck]
      end
      lives[ck] = math.max(lives[ck] or 0, life)
    end
    at = pairs_at
    for _ = 1, m do
      local old = redis.pcall('HGET', key, ARGV[at])
      local new, last = old, nil
      if not (type(old) == 'table' and old.err) then
        new, last = merge(old, ARGV[at + 1], cur)
      end
      if type(new) == 'table' and new.err then
        failed, err = op, new.err
        break
      end
      saved[op + 1] = old
      if new then
        redis.call('HSET', key, ARGV[at], new)
      end
      if ck then
        cur = last
        finals[ck] = last
      end
      at = at + 2
      op = op + 1
    end
    if failed then break end
  end
  if gauge and not failed then
    for ck, v in pairs(finals) do
      redis.call('SET', KEYS[ck], string.format('%.17g', v))
      if lives[ck] > 0 then
        redis.call('EXPIRE', KEYS[ck], lives[ck])
      end
    end
  end
end

if failed then
  -- Take back the operations before the failed one: sums by subtraction,
  -- blobs by restoring what they held; through pending slices, every
  -- change noted.
  local at, op = first, 0
  for k = 1, pending and 0 or h do
    local key = KEYS[marker + k]
    local _, _, _, m, pairs_at = apply_hash(at, gauge)
    at = pairs_at
    for _ = 1, m do
      if op >= failed then break end
      if not merge then
        take_back(key, ARGV[at], ARGV[at + 1])
      elseif saved[op + 1] then
        redis.call('HSET', key, ARGV[at], saved[op + 1])
      else
        redis.call('HDEL', key, ARGV[at])
      end
      at = at + 2
      op = op + 1
    end
    if op >= failed then break end
  end
  if pending then
    -- The runs of hashes written directly first: subtractions, which
    -- commute with every other subtraction, and come before the DEL of a
    -- hash made earlier in the call (its first write), which `undo` holds.
    for r = 1, nruns, 3 do
      local at, k = runs[r], runs[r + 1]
      for _ = 1, runs[r + 2] do
        local m, pairs_at = apply_direct_hash(at)
        for j = 0, m - 1 do
          take_back(KEYS[k], ARGV[pairs_at + 2 * j], ARGV[pairs_at + 2 * j + 1])
        end
        at, k = pairs_at + 2 * m, k + 1
      end
    end
    fold_undo(undo)
  end
  if not merge then
    if err == CHECK then
      return redis.error_reply(CHECK .. ' ' .. failed .. ' a count passed 9e17 unchecked')
    end
    if string.find(err, 'overflow', 1, true) then
      return redis.error_reply('TALLY_OVERFLOW ' .. failed)
    end
    return redis.error_reply('TALLY_FAILED ' .. failed .. ' ' .. err)
  end
  local code, rest = string.match(err, '^(%S+)%s*(.*)$')
  if code == 'TALLY_OVERFLOW' or code == 'TALLY_FAILED' then
    return redis.error_reply(code .. ' ' .. failed .. ' ' .. rest)
  end
  return redis.error_reply('TALLY_FAILED ' .. failed .. ' ' .. err)
end

local reg = marker + h
if expiring then
  -- layout.rs's ENDS_SCALE and NO_MARK.
  local ENDS_SCALE, NO_MARK = 524288, 524287
  local below_text, below
  below_text, below, at = apply_below(at)
  while at <= #ARGV do
    local names, ends = KEYS[reg + 1], KEYS[reg + 2]
    reg = reg + 2
    local n
    n, at = apply_registry(at)
    local changed = false
    for _ = 1, n do
      local name, score_text, score, must, k, quads, after = apply_series(at)
      local old = redis.call('ZSCORE', ends, name)
      if must or not old or tonumber(old) ~= score then
        -- The stored write's mark, when it vouches for chunks (a write
        -- that must set its chunks' expiry sets them all).
        local mark = nil
        if not must and old and tonumber(old) >= below then
          mark = tonumber(old) % ENDS_SCALE
          if mark == NO_MARK then mark = nil end
        end
        for j = 0, k - 1 do
          local key, ttl, first_mark, marks = apply_chunk(quads + 4 * j)
          if not (mark and (mark - first_mark) % NO_MARK < marks) then
            redis.call('EXPIRE', KEYS[key], ttl)
          end
        end
        if not old or score > tonumber(old) then
          redis.call('ZADD', ends, score_text, name)
        end
        -- A name in `ends@e` is in the registry (they gain and lose names
        -- together): only a series new, or back after its data expired,
        -- is registered, and only then are expired series pruned, so the
        -- registries stay bounded by the live series and the additions.
        if not old or tonumber(old) < below then
          redis.call('ZADD', names, 0, name)
          changed = true
        end
      end
      at = after
    end
    if changed then
      local gone = redis.call('ZRANGEBYSCORE', ends, '-inf', '(' .. below_text, 'LIMIT', 0, 100)
      if #gone > 0 then
        redis.call('ZREM', ends, unpack(gone))
        redis.call('ZREM', names, unpack(gone))
      end
    end
  end
else
  while at <= #ARGV do
    reg = reg + 1
    local key = KEYS[reg]
    local m, members, after = apply_members(at)
    local args = {}
    for j = 0, m - 1 do
      local member, vouch = apply_member(members, j)
      if not held[vouch - marker] then
        args[#args + 1] = '0'
        args[#args + 1] = member
      end
      if #args == 1000 or (j == m - 1 and #args > 0) then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    at = after
  end
end
if marker == 1 then
  redis.call('SET', KEYS[1], seq, 'EX', 604800)
end
return written

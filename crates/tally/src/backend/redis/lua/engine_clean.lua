-- One cleaning step: a batch of registry entries of any space whose slices
-- are hash fields (counters, and every space cleaned by the cleaner), for
-- either key layout.
--
-- KEYS[1]: the registry (a shard's `names`, or the book's `known:`);
--          then np hash keys per entry, in entry order.
-- ARGV[1]: np, hashes per entry (the tagged layout: one per resolution; the
--          book's layout: 1, as each `known:` member names one hash).
-- ARGV[2]: '1' for the book's rule (drop an entry only when this step removed
--          its last sample), '0' to drop any entry whose hashes are all empty.
-- ARGV[4]: nw, the number of windows; then each window: its length m and
--          m slice starts (decimal text).
-- Then, from the index b after the windows: when ARGV[3] is '1' the
-- cutoffs are shared by every entry (the tagged layout: ARGV[b .. b+np-1]
-- hold them, then one member per entry); when '0' each entry brings its
-- own (the book's layout: per entry, its member followed by np cutoffs).
-- A cutoff is either a decimal integer: samples whose slice starts at or
-- before it are removed, found by reading the hash's fields (a cleaner's
-- first pass); or `w<k>`: exactly the slices of window k are removed, by
-- name (HDEL), at a cost proportional to the window, not to the hash (the
-- slices that passed the cutoff since the cleaner's last visit); '' (or a
-- negative cutoff) means the hash has nothing due.
--
-- Reading, slice starts are compared with the cutoff as decimal text (a
-- shorter number is smaller), which spares a number conversion per sample;
-- a field that is not a plain decimal integer is never removed.
--
-- Runs atomically, so an entry is only dropped if no writer added to it in
-- between. Returns {samples removed, entries dropped}.
local function at_or_before(f, cut, cutlen)
  local n = #f
  if n ~= cutlen then
    return n < cutlen and n > 0 and not string.find(f, '%D')
  end
  return f <= cut and not string.find(f, '%D')
end

local function trim(key, cut)
  if type(cut) == 'table' then
    -- A window: ARGV[cut[1] .. cut[2]] are the slices to remove.
    local gone = 0
    for i = cut[1], cut[2], 1000 do
      gone = gone + redis.call('HDEL', key, unpack(ARGV, i, math.min(i + 999, cut[2])))
    end
    return gone, redis.call('HLEN', key)
  end
  local fields = redis.call('HKEYS', key)
  local cutlen = #cut
  local old = {}
  for i = 1, #fields do
    local f = fields[i]
    if at_or_before(f, cut, cutlen) then
      old[#old + 1] = f
    end
  end
  for i = 1, #old, 1000 do
    redis.call('HDEL', key, unpack(old, i, math.min(i + 999, #old)))
  end
  return #old, #fields - #old
end

local np = tonumber(ARGV[1])
local book = ARGV[2] == '1'
local shared = ARGV[3] == '1'
local windows = {}
local b = 5
for w = 1, tonumber(ARGV[4]) do
  local m = tonumber(ARGV[b])
  windows[w] = {b + 1, b + m}
  b = b + m + 1
end

-- A cutoff (decimal text, no leading zeros) or a window (a table), or nil
-- when nothing is due.
local function due(cut)
  if cut == '' or string.sub(cut, 1, 1) == '-' then
    return nil
  end
  if string.sub(cut, 1, 1) == 'w' then
    return windows[tonumber(string.sub(cut, 2))]
  end
  return cut
end

local cuts = {}
local first, stride
if shared then
  for j = 1, np do
    cuts[j] = due(ARGV[b + j - 1])
  end
  first, stride = b + np, 1
else
  first, stride = b, np + 1
end
local entries = (#ARGV - first + 1) / stride
local removed, dropped = 0, 0
for e = 0, entries - 1 do
  local base = first + e * stride
  local member = ARGV[base]
  local empty, gone_here = true, 0
  for j = 1, np do
    local key = KEYS[1 + e * np + j]
    local cut
    if shared then
      cut = cuts[j]
    else
      cut = due(ARGV[base + j])
    end
    if cut then
      local gone, left = trim(key, cut)
      gone_here = gone_here + gone
      if left > 0 then
        empty = false
      end
    elseif empty and redis.call('EXISTS', key) == 1 then
      empty = false
    end
  end
  removed = removed + gone_here
  if empty and (gone_here > 0 or not book) then
    dropped = dropped + redis.call('ZREM', KEYS[1], member)
  end
end
return {removed, dropped}

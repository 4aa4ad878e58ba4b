-- One cleaning step: a batch of registry entries of any space whose slices
-- are hash fields (counters, and every space cleaned by the cleaner), for
-- either key layout.
--
-- KEYS[1]: the registry (a shard's `names`, or the book's `known:`);
--          then np hash keys per entry, in entry order.
-- ARGV[1]: np, hashes per entry (the tagged layout: one per precision; the
--          book's layout: 1, as each `known:` member names one hash; the
--          compact layout: its one hash, once per precision).
-- ARGV[2]: '1' for the book's rule (drop an entry only when this step removed
--          its last sample), '0' to drop any entry whose hashes are all empty.
-- ARGV[4]: nw, the number of windows; then each window: its length m and
-- m fields (slice starts as decimal text).
-- Then, from the index b after the windows: when ARGV[3] is '1' the
-- cutoffs are shared by every entry (the tagged layout: ARGV[b .. b+np-1]
-- hold them, then one member per entry); when '0' each entry brings its
-- own (per entry, its member followed by np cutoffs).
-- A cutoff is `w<k>`: exactly the fields of window k are removed, by name
-- (HDEL), at a cost proportional to the window, not to the hash: the slices
-- that passed the cutoff since the cleaner's last visit, or, on a pass that
-- knows no earlier visit, the old fields the client read from the hash
-- (HKEYS) just before; '' means the hash has nothing due.
--
-- Runs atomically, so an entry is only dropped if no writer added to it in
-- between (whether its hashes exist is read here, after the removal). Returns
-- {samples removed, entries dropped}.
local function trim(key, cut)
  -- ARGV[cut[1] .. cut[2]] are the fields to remove.
  local gone = 0
  for i = cut[1], cut[2], 1000 do
    gone = gone + redis.call('HDEL', key, unpack(ARGV, i, math.min(i + 999, cut[2])))
  end
  return gone
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

-- A window (a table), or nil when nothing is due.
local function due(cut)
  if cut == '' then
    return nil
  end
  return windows[tonumber(string.sub(cut, 2))]
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
    local cut
    if shared then
      cut = cuts[j]
    else
      cut = due(ARGV[base + j])
    end
    if cut then
      gone_here = gone_here + trim(KEYS[1 + e * np + j], cut)
    end
  end
  -- Whether the entry is empty is asked once everything due is removed (the
  -- compact layout names its one hash at every precision), only while it
  -- may be, and not at all where it could not be dropped (the book's rule,
  -- nothing removed): an empty hash does not exist in Redis.
  if gone_here > 0 or not book then
    for j = 1, np do
      if redis.call('EXISTS', KEYS[1 + e * np + j]) == 1 then
        empty = false
        break
      end
    end
  end
  removed = removed + gone_here
  if empty and (gone_here > 0 or not book) then
    dropped = dropped + redis.call('ZREM', KEYS[1], member)
  end
end
return {removed, dropped}

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
-- ARGV[3]: '1' when the cutoffs are shared by every entry (the tagged
--          layout: ARGV[4 .. 3+np] hold them, then one member per entry);
--          '0' when each entry brings its own (the book's layout: per entry,
--          its member followed by np cutoffs).
-- A cutoff is a decimal integer: samples whose slice starts at or before it
-- are removed; '' (or a negative cutoff) means the hash has nothing due.
--
-- Slice starts are compared with the cutoff as decimal text (a shorter
-- number is smaller), which spares a number conversion per sample; a field
-- that is not a plain decimal integer is never removed.
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

-- A cutoff (decimal text, no leading zeros), or nil when nothing is due.
local function due(cut)
  if cut == '' or string.sub(cut, 1, 1) == '-' then
    return nil
  end
  return cut
end

local np = tonumber(ARGV[1])
local book = ARGV[2] == '1'
local shared = ARGV[3] == '1'
local cuts = {}
local first, stride
if shared then
  for j = 1, np do
    cuts[j] = due(ARGV[3 + j])
  end
  first, stride = 4 + np, 1
else
  first, stride = 4, np + 1
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

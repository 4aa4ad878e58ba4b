-- One cleaning step: a batch of registry entries, for either key layout.
--
-- KEYS[1]: the registry (a shard's `names`, or the book's `known:`);
--          then np hash keys per entry, in entry order.
-- ARGV[1]: np, hashes per entry (the tagged layout: one per precision; the
--          book's layout: 1, as each `known:` member names one hash).
-- ARGV[2]: '1' for the book's rule (drop an entry only when this step removed
--          its last sample), '0' to drop any entry whose hashes are all empty.
-- Then per entry: its registry member, followed by np cutoffs, one per hash:
--          samples whose slice starts at or before it are removed; '' means
--          the hash is not due in this pass.
--
-- Runs atomically, so an entry is only dropped if no writer added to it in
-- between. Returns {samples removed, entries dropped}.
local function trim(key, cutoff)
  local fields = redis.call('HKEYS', key)
  local old = {}
  for _, f in ipairs(fields) do
    local s = tonumber(f)
    if s and s <= cutoff then
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
local entries = (#ARGV - 2) / (np + 1)
local removed, dropped = 0, 0
for e = 0, entries - 1 do
  local base = 3 + e * (np + 1)
  local member = ARGV[base]
  local empty, gone_here = true, 0
  for j = 1, np do
    local key = KEYS[1 + e * np + j]
    local cut = ARGV[base + j]
    if cut ~= '' then
      local gone, left = trim(key, tonumber(cut))
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

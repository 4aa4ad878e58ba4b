-- engine_fold.lua: folds the pending slices of a batch of statistics into
-- their precisions' slices before the cleaner trims them (stats_fold.lua,
-- prepended with kind_stats.lua), so that a trim never takes what only a
-- pending slice holds and a series is never dropped while it has one.
--
-- KEYS: per series its pending slice's key, then its n hashes, one per
-- precision, finest first (the compact layout's one hash, n times).
-- ARGV[1]: n; ARGV[2 .. n + 1]: the precisions, finest first.
-- Returns the number of pending slices folded. A series whose fold fails
-- is left as it was and the error returned (the series before it stay
-- folded: each fold is whole on its own).
local n = tonumber(ARGV[1])
local precisions = {}
for j = 1, n do
  precisions[j] = ARGV[1 + j]
end
local folded = 0
for i = 1, #KEYS, n + 1 do
  local keys = {}
  for j = 1, n do
    keys[j] = KEYS[i + j]
  end
  local undo = {}
  local e = fold_pending(undo, KEYS[i], keys, precisions)
  if e then
    fold_undo(undo)
    return redis.error_reply(e)
  end
  if #undo > 0 then
    folded = folded + 1
  end
end
return folded

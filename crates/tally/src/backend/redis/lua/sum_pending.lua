-- A busy counter's increment into its pending slice (issue 20), shared by
-- the sums' apply script (sum_fast.lua, before anything else of it) and
-- the short call (sum_short.lua): adds `delta` to the pending count of
-- `pend` when its finest slice is the one pending, as stats_fold.lua's
-- fold_same decides (the same finest field `field` at the finest
-- precision `p`, as `t` starts, and the delta and count within SUM_SMALL's
-- 16 characters), after the lane's record `lane` (nil when the write has
-- none) says the write `seq` is new, and records it. Answers 2 (written,
-- and the pending slice is at this write's slice), 0 (a replay: nothing
-- written), or nil when it wrote nothing and the full path must decide (a
-- failed HINCRBY changes nothing), then what it read of the pending slice
-- (HMGET of s, b and t) when it read it.
local function sum_pending(lane, seq, pend, p, field, delta)
  if lane and tonumber(seq) <= tonumber(redis.call('GET', lane) or '0') then
    return 0
  end
  local cur = redis.call('HMGET', pend, 's', 'b', 't')
  local head, t = p .. ':' .. field, cur[3] or ''
  if cur[1] ~= field or not (t == head or string.sub(t, 1, #head + 1) == head .. ' ') then
    return nil, cur
  end
  if #delta > 16 or #cur[2] > 16 then
    return nil, cur
  end
  local r = redis.pcall('HINCRBY', pend, 'b', delta)
  if type(r) == 'table' and r.err then
    return nil, cur
  end
  if lane then
    redis.call('SET', lane, seq, 'EX', 604800)
  end
  return 2
end

-- The close of daily_incr.lua and daily_running.lua, appended to each:
-- calls the script's entity(views, stats, mark, n, before, first) for each
-- entity in ARGV's order (mark nil when the call has none; n its number of
-- days; before the views it adds to `before`; its days at ARGV[first],
-- ARGV[first + 2], ..., each followed by its views), then records the
-- lane's call as applied (7 days) unless it was a replay, and answers.

local at = 6
for e = 1, entities do
  local mark = nil
  if marks then
    mark = KEYS[m0 + e]
  end
  local n = tonumber(ARGV[at])
  entity(KEYS[v0 + e], KEYS[s0 + e], mark, n, ARGV[at + 1], at + 2)
  at = at + 2 + 2 * n
end
if lane and not replay then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', 604800)
end
return out

-- The call shared by daily_incr.lua and daily_running.lua (prepended to
-- each, after lua/once.lua and lua/daily_sum.lua): its KEYS and ARGV, as
-- daily_incr.lua describes them, read once, and whether it replays a
-- writer lane's call already applied.

local lane = ARGV[1] == '1'
local marks = ARGV[3] == '1'
local floor = ARGV[4]
local entities = tonumber(ARGV[5])
local find, tonumber, unpack, min = string.find, tonumber, unpack, math.min

-- KEYS[v0 + e], KEYS[s0 + e], KEYS[m0 + e]: entity e's views, stats and
-- mark keys.
local v0 = lane and 1 or 0
local s0 = v0 + entities
local m0 = s0 + entities

local replay = false
if lane then
  local last = redis.call('GET', KEYS[1])
  replay = last ~= false and tonumber(ARGV[2]) <= tonumber(last)
end

-- The answer, built entity by entity: out[1 .. o].
local out, o = {}, 0

-- Appends the sum `s` (lua/daily_sum.lua) to the answer as hi, lo.
local function answer_sum(s)
  sum_norm(s)
  out[o + 1], out[o + 2] = s[1], s[2]
  o = o + 2
end

-- Calls write(views, stats, mark, n, before, first) for each entity of the
-- call, in order: its keys (mark nil when the call has none), its number
-- of days, the views it adds to `before`, and the index of its first day
-- in ARGV (its days at ARGV[first], ARGV[first + 2], ..., each followed by
-- its views). Then records the lane's call as applied (7 days), unless it
-- was a replay, and returns the answer.
local function daily_call_run(write)
  local at = 6
  for e = 1, entities do
    local mark = nil
    if marks then
      mark = KEYS[m0 + e]
    end
    local n = tonumber(ARGV[at])
    write(KEYS[v0 + e], KEYS[s0 + e], mark, n, ARGV[at + 1], at + 2)
    at = at + 2 + 2 * n
  end
  if lane and not replay then
    redis.call('SET', KEYS[1], ARGV[2], 'EX', 604800)
  end
  return out
end

-- The opening of daily_incr.lua and daily_running.lua, prepended to each
-- (after lua/once.lua and lua/daily_sum.lua; lua/daily_each.lua closes
-- them): the call's KEYS and ARGV as daily_incr.lua describes them, read
-- once, whether the call replays a writer lane's call already applied,
-- and the answer, built entity by entity in out[1 .. o].

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

local out, o = {}, 0

-- Appends an entity's answer: its status (1 written, 0 applied already),
-- its n day counts (counts[1 .. n]), then the sum `total`
-- (lua/daily_sum.lua) as hi, lo.
local function answer(status, counts, n, total)
  out[o + 1] = status
  for j = 1, n do
    out[o + 1 + j] = counts[j]
  end
  sum_norm(total)
  out[o + n + 2], out[o + n + 3] = total[1], total[2]
  o = o + n + 3
end

-- Fixed-window check, a port of limits/fixed.rs (integers below 2^53).
--
-- KEYS[1]  the counter of the window that holds `now`
-- KEYS[2]  a keyed check's mark (lua/once.lua), absent without a key: kept
--          with an admitted check's count; when it is there already, the
--          check counts nothing and is admitted
-- ARGV[1]  now, Unix ms;  ARGV[2] window, ms;  ARGV[3] limit;  ARGV[4] cost
-- ARGV[5]  extra ms the state is kept past its use (clock-skew margin)
--
-- lua/once.lua and lua/int.lua (idiv, ceil_div) are prepended when the
-- script is loaded.
-- Returns {allowed 0/1, remaining, reset at (ms), retry after (ms, -1: never)}.
local now, w, limit, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local seen = once_applied(KEYS[2])
if seen then
  -- Counted already (a keyed check sent again): count nothing, answer
  -- from the current state (a check of cost 0 is always admitted).
  cost = 0
end
local finish = (idiv(now, w) + 1) * w
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local remaining = limit - count
if remaining < 0 then remaining = 0 end
if cost > limit then
  return {0, remaining, finish, -1}
end
if count + cost <= limit then
  if not seen then
    redis.call('INCRBY', KEYS[1], cost)
    redis.call('PEXPIRE', KEYS[1], finish - now + tonumber(ARGV[5]))
    once_mark(KEYS[2])
  end
  return {1, limit - count - cost, finish, 0}
end
return {0, remaining, finish, finish - now}

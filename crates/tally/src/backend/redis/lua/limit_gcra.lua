-- GCRA check, a port of limits/gcra.rs: times in µs, integers below 2^53.
--
-- KEYS[1]  the theoretical arrival time (µs, decimal text)
-- KEYS[2]  a keyed check's mark (lua/once.lua), absent without a key: kept
--          with an admitted check's count; when it is there already, the
--          check counts nothing and is admitted
-- ARGV[1]  now, Unix ms;  ARGV[2] window, ms;  ARGV[3] limit;  ARGV[4] burst
-- ARGV[5]  cost;  ARGV[6] extra ms the state is kept past its use
--
-- lua/once.lua and lua/int.lua (idiv, ceil_div) are prepended when the
-- script is loaded.
-- Returns {allowed 0/1, remaining, reset at (ms), retry after (ms, -1: never)}.
local now_ms, w, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local burst, cost = tonumber(ARGV[4]), tonumber(ARGV[5])
local seen = once_applied(KEYS[2])
if seen then
  -- Counted already (a keyed check sent again): count nothing, answer
  -- from the current state (a check of cost 0 is always admitted).
  cost = 0
end
local t = ceil_div(w * 1000, limit)
local now = now_ms * 1000
local tau = burst * t
local stored = redis.call('GET', KEYS[1])
local base = now
if stored and tonumber(stored) > now then base = tonumber(stored) end
local before = 0
if tau > base - now then before = idiv(tau - (base - now), t) end
if cost > burst then
  return {0, before, ceil_div(base, 1000), -1}
end
local new_tat = base + cost * t
local allow_at = 0
if new_tat > tau then allow_at = new_tat - tau end
if allow_at <= now then
  if not seen then
    redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX',
      ceil_div(new_tat - now, 1000) + tonumber(ARGV[6]))
    once_mark(KEYS[2])
  end
  return {1, idiv(tau - (new_tat - now), t), ceil_div(new_tat, 1000), 0}
end
return {0, before, ceil_div(base, 1000), ceil_div(allow_at - now, 1000)}

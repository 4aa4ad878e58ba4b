-- Sliding-window-counter check, a port of limits/sliding.rs (integers
-- below 2^53).
--
-- KEYS[1]  the previous window's counter;  KEYS[2] the current window's
-- KEYS[3]  a keyed check's mark (lua/once.lua), absent without a key: kept
--          with an admitted check's count; when it is there already, the
--          check counts nothing and is admitted
-- ARGV[1]  now, Unix ms;  ARGV[2] window, ms;  ARGV[3] limit;  ARGV[4] cost
-- ARGV[5]  extra ms the state is kept past its use (clock-skew margin)
--
-- lua/once.lua and lua/int.lua (idiv, ceil_div) are prepended when the
-- script is loaded.
-- Returns {allowed 0/1, remaining, reset at (ms), retry after (ms, -1: never)}.
local now, w, limit, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local seen = once_applied(KEYS[3])
if seen then
  -- Counted already (a keyed check sent again): count nothing, answer
  -- from the current state (a check of cost 0 is always admitted).
  cost = 0
end
local start = idiv(now, w) * w
local e = now - start
local prev = tonumber(redis.call('GET', KEYS[1]) or '0')
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local capacity = limit * w
local weighted = prev * (w - e) + cur * w
local before = 0
if capacity > weighted then before = idiv(capacity - weighted, w) end
local function reset_of(c)
  if c > 0 then return start + 2 * w elseif prev > 0 then return start + w end
  return now
end
if cost > limit then
  return {0, before, reset_of(cur), -1}
end
if weighted + cost * w <= capacity then
  if not seen then
    redis.call('INCRBY', KEYS[2], cost)
    redis.call('PEXPIRE', KEYS[2], start + 2 * w - now + tonumber(ARGV[5]))
    once_mark(KEYS[3])
  end
  local c = cur + cost
  return {1, idiv(capacity - (prev * (w - e) + c * w), w), reset_of(c), 0}
end
local retry_at = nil
if cur + cost <= limit and prev > 0 then
  local d = ceil_div(prev * (w - e) + (cur + cost) * w - capacity, prev)
  if e + d < w then retry_at = now + d end
end
if not retry_at then
  local need = cur * w + cost * w
  if need <= capacity then
    retry_at = start + w
  else
    local e2 = ceil_div(need - capacity, cur)
    if e2 < w then retry_at = start + w + e2 else retry_at = start + 2 * w end
  end
end
return {0, before, reset_of(cur), retry_at - now}

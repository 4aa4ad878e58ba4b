-- A measurement, not the store: an observation's delta blob (1 % accuracy),
-- a value from the server's clock, and one merge into a slice.
local ALPHA, BOUND = 0.01, 2048
local LG = math.log((1 + ALPHA) / (1 - ALPHA))
local P = {1, 5, 60, 300, 3600, 18000, 86400}
local function delta_of(v)
  local idx = math.ceil(math.log(v) / LG)
  return cmsgpack.pack({1, ALPHA, BOUND, 1, v, v * v, v, v, 0, idx, {1}, 0, {}})
end
local t = redis.call('TIME')
local now, us = tonumber(t[1]), tonumber(t[2])
local function value(i)
  local a = ((us * 7919 + i * 104729) % 100003) / 100003
  local b = ((us * 104729 + i * 7919) % 99991) / 99991
  local c = ((us * 31 + i * 1299709) % 99989) / 99989
  return 100 * math.exp((a + b + c - 1.5) * 0.8)
end
local function merge_into(k, f, delta)
  local old = redis.call('HGET', k, f)
  local new = merge_stats(old, delta)
  if type(new) == 'table' then error(new.err) end
  redis.call('HSET', k, f, new)
end

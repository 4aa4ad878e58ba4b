-- Exact sums of an entity's views hash, for daily_incr.lua and
-- daily_total.lua (prepended to each).
--
-- The all-time total is the sum of every value of {<prefix>:<id>}:views, as
-- the article's own total script (HVALS, tonumber, +) computes it. Lua numbers
-- are doubles, exact only below 2^53, while Redis counts are 64-bit: a sum
-- here is two limbs {hi, lo} meaning hi * 10^9 + lo, each far below 2^53
-- for any hash under a million fields, so every sum is exact.
local E9 = 1000000000

local function sum_new()
  return {0, 0}
end

-- Adds the decimal integer `text` to `s`; false when it is not one.
local function sum_add(s, text)
  local sign, digits = string.match(text, '^(%-?)(%d+)$')
  if not digits or #digits > 19 then
    return false
  end
  local hi = tonumber(string.sub(digits, 1, -10)) or 0
  local lo = tonumber(string.sub(digits, -9))
  if sign == '-' then
    hi, lo = -hi, -lo
  end
  s[1], s[2] = s[1] + hi, s[2] + lo
  return true
end

-- The sum of list[start], list[start + step], ... (HVALS: 1, 1; HGETALL:
-- 2, 2). Counts below 10^9, nearly all, are read by tonumber as the article's
-- script reads them; larger ones go through sum_add. Returns nil and the
-- index of a value that is not an integer.
local function sum_values(list, start, step)
  local s, lo = sum_new(), 0
  for i = start, #list, step do
    local n = tonumber(list[i])
    if n and n > -E9 and n < E9 and n % 1 == 0 then
      lo = lo + n
    elseif not sum_add(s, list[i]) then
      return nil, i
    end
  end
  s[2] = s[2] + lo
  return s
end

-- Adds (or, with sign -1, subtracts) the sum `t` to `s`.
local function sum_merge(s, t, sign)
  s[1], s[2] = s[1] + sign * t[1], s[2] + sign * t[2]
end

-- Brings `lo` into [0, 10^9), so that the sign of the sum is that of `hi`.
local function sum_norm(s)
  local carry = math.floor(s[2] / E9)
  s[1], s[2] = s[1] + carry, s[2] - carry * E9
  return s
end

local function sum_is_zero(s)
  sum_norm(s)
  return s[1] == 0 and s[2] == 0
end

-- True when `s` fits a signed 64-bit integer (-2^63 .. 2^63 - 1).
local function sum_fits(s)
  sum_norm(s)
  local hi, lo = s[1], s[2]
  local below_max = hi < 9223372036 or (hi == 9223372036 and lo <= 854775807)
  local above_min = hi > -9223372037 or (hi == -9223372037 and lo >= 145224192)
  return below_max and above_min
end

-- The decimal text of `s` (which fits 64 bits), for HINCRBY.
local function sum_text(s)
  sum_norm(s)
  if s[1] < 0 then
    return '-' .. sum_text({-s[1], -s[2]})
  elseif s[1] == 0 then
    return string.format('%.0f', s[2])
  end
  return string.format('%.0f%09.0f', s[1], s[2])
end

-- Adds what an earlier Tally left in `stats_key` ({<prefix>:<id>}:stats)
-- to the views sum `s`: its running `total` counted days it later dropped
-- from the views hash without keeping their sum, so the all-time total is
-- the larger of the two. Returns nil when there is no such total, else the
-- part added (never negative); a total that is not an integer is an error
-- reply, returned second.
local function add_legacy(s, stats_key)
  local total = redis.call('HGET', stats_key, 'total')
  if not total then
    return nil
  end
  local gap = sum_new()
  if not sum_add(gap, total) then
    return nil, redis.error_reply('TALLY_CORRUPT ' .. stats_key .. ' total')
  end
  sum_merge(gap, s, -1)
  sum_norm(gap)
  if gap[1] < 0 then
    return sum_new()
  end
  sum_merge(s, gap, 1)
  return gap
end

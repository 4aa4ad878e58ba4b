-- Exact integer division for the rate-limit scripts (prepended to each).
-- Lua numbers are doubles: exact for integers below 2^53, which the limits'
-- bounds guarantee; these correct the rare rounding of a / b.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end
local function ceil_div(a, b)
  return idiv(a + b - 1, b)
end

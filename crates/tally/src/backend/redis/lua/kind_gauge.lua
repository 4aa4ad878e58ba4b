-- The gauge kind's merge, prepended to the scripts that write gauges
-- (engine/kinds/gauge.rs is its Rust twin and documents the blob). A blob
-- is the MessagePack array [1, parts, ...]: parts 1 = relative part
-- (d, lo, hi), 2 = absolute part (last, lo, hi), 3 = both (relative
-- first), 0 = no operation. A stored slice is absolute only.
--
-- merge_gauge(old, delta, current): old is the slice's stored blob, or
-- false when the slice holds nothing; delta is a write's blob; current is
-- the gauge's current value (a Lua number; false or nil: 0), used only
-- when old is false. The delta's operations run, in order, from old's last
-- value (else from current); the slice's min and max take the values held
-- after each operation. Returns the new blob (or old unchanged when the
-- delta holds no operation: false stays false) and the gauge's value after
-- it, or an error reply (a table with `err`, changing nothing):
--   "TALLY_OVERFLOW gauge"         a value would become infinite
--   "TALLY_FAILED gauge <why>"     a blob that is not a gauge
-- Callers keeping `current` as a string must write it with
-- string.format('%.17g', x): tostring keeps only 14 digits.
local function gauge_parts(blob, which)
  local ok, t = pcall(cmsgpack.unpack, blob)
  if not ok or type(t) ~= 'table' or t[1] ~= 1 or type(t[2]) ~= 'number' then
    return nil, nil, 'TALLY_FAILED gauge: the ' .. which .. ' is not a gauge'
  end
  local parts, at, rel, abs = t[2], 3, nil, nil
  if parts == 1 or parts == 3 then
    rel = {t[3], t[4], t[5]}
    at = 6
  end
  if parts == 2 or parts == 3 then
    abs = {t[at], t[at + 1], t[at + 2]}
  end
  if (parts ~= 0 and not rel and not abs) or #t ~= at + (abs and 2 or -1) then
    return nil, nil, 'TALLY_FAILED gauge: the ' .. which .. ' is not a gauge'
  end
  return rel, abs, nil
end

local function merge_gauge(old, delta, current)
  local rel, abs, err = gauge_parts(delta, 'delta')
  if err then return redis.error_reply(err) end
  local last, lo, hi
  if old then
    local orel, oabs
    orel, oabs, err = gauge_parts(old, 'stored value')
    if err then return redis.error_reply(err) end
    if orel or not oabs then
      return redis.error_reply('TALLY_FAILED gauge: the stored value is not a slice')
    end
    last, lo, hi = oabs[1], oabs[2], oabs[3]
  else
    last, lo, hi = tonumber(current) or 0, math.huge, -math.huge
  end
  if not rel and not abs then return old, last end
  if rel then
    last, lo, hi = last + rel[1], math.min(lo, last + rel[2]), math.max(hi, last + rel[3])
  end
  if abs then
    last, lo, hi = abs[1], math.min(lo, abs[2]), math.max(hi, abs[3])
  end
  for _, x in ipairs({last, lo, hi}) do
    if x == math.huge or x == -math.huge or x ~= x then
      return redis.error_reply('TALLY_OVERFLOW gauge')
    end
  end
  return cmsgpack.pack({1, 2, last, lo, hi}), last
end

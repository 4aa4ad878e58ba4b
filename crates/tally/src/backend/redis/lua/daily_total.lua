-- The all-time total of one entity: the sum of its views hash, exactly what
-- the article's own total script sums (lua/daily_sum.lua is prepended).
--
-- KEYS[1]: {<prefix>:<id>}:views  hash YYYYMMDD -> views, plus `before`
-- KEYS[2]: {<prefix>:<id>}:stats  an earlier Tally's running total, if any
--
-- Returns {hi, lo}: the total is hi * 10^9 + lo (0 <= lo < 10^9). A value
-- that is not an integer is the error "TALLY_CORRUPT <key> <field>".
local total, bad = sum_values(redis.call('HVALS', KEYS[1]), 1, 1)
if not total then
  -- Name the field (HGETALL lists values in HVALS's order).
  local flat = redis.call('HGETALL', KEYS[1])
  return redis.error_reply('TALLY_CORRUPT ' .. KEYS[1] .. ' ' .. flat[2 * bad - 1])
end
local _, err = add_legacy(total, KEYS[2])
if err then
  return err
end
sum_norm(total)
return {total[1], total[2]}

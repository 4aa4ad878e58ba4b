-- Prelude of engine_apply.lua and engine_revert.lua: takes back a sum's
-- `delta` (decimal text, never i64::MIN) from `field` of hash `key`, where
-- it was added. A field left at 0 most likely did not exist before, so it
-- goes.
local function take_back(key, field, delta)
  local left
  if delta == '0' then
    left = tonumber(redis.call('HGET', key, field))
  elseif string.sub(delta, 1, 1) == '-' then
    left = redis.call('HINCRBY', key, field, string.sub(delta, 2))
  else
    left = redis.call('HINCRBY', key, field, '-' .. delta)
  end
  if left == 0 then
    redis.call('HDEL', key, field)
  end
end

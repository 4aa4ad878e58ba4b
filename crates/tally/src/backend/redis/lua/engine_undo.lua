-- Prelude of engine_apply.lua and engine_revert.lua: how a merge that was
-- already done is taken back.
--
-- take_back(key, field, delta): a sum's delta (decimal text, never
-- i64::MIN) is subtracted from `field` of hash `key`, where it was added.
-- A field left at 0 most likely did not exist before, so it goes.
--
-- restore(key, field, old): a blob kind's field gets back the value it held
-- before the merge (`old`), or goes if it held nothing (`old` is false).
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

local function restore(key, field, old)
  if old then
    redis.call('HSET', key, field, old)
  else
    redis.call('HDEL', key, field)
  end
end

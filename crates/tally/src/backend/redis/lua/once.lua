-- The mark of a keyed write (an Idempotency-Key), prepended to the scripts
-- of the writes that take one (ts_add.lua, daily_incr.lua,
-- buffer_incr.lua; see backend/redis/once.rs). `key` is the mark's key,
-- `{<the call's tag>}:applied:<writer hex>`, in the same hash slot as the
-- call's other keys, or nil for a write without a key.
--
-- once_applied(key): true when this write was applied already (its mark is
--   there): the caller then writes nothing.
-- once_mark(key): records that it was, for ONCE_MS (MAX_RETENTION, 7 days);
--   called after every check passed, so a refused write leaves no mark.
local ONCE_MS = 604800000

local function once_applied(key)
  return key ~= nil and redis.call('EXISTS', key) == 1
end

local function once_mark(key)
  if key ~= nil then
    redis.call('SET', key, '1', 'PX', ONCE_MS)
  end
end

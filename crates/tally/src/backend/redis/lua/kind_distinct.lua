-- The distinct kind's merge, prepended to the scripts that write sets
-- (engine/kinds/distinct.rs is its Rust twin). A stored slice is Redis's
-- own HyperLogLog string (what GET returns after PFADD or PFMERGE), so the
-- merge is Redis's: a delta is either the byte 3 then a MessagePack array
-- of values (DistinctValue's encoding of a small set: PFADD them) or a
-- HyperLogLog in Redis's dense encoding ("HYLL...", DistinctValue's
-- redis_bytes: PFMERGE it).
--
-- The merge works in two scratch keys, the call's last two KEYS (in the
-- hash tag of its hashes, so it runs on a cluster): the slice's old bytes
-- are SET into the first, values PFADDed to it or the delta SET into the
-- second and PFMERGEd; the result is read with GET. Both keys are deleted
-- before the merge returns, whatever happened.
--
-- merge_distinct(old, delta): old is the stored string, or false when the
-- slice holds nothing. Returns the new string, or an error reply (a table
-- with `err`, changing nothing):
--   "TALLY_FAILED distinct <why>"   a delta or a stored value that is not
--                                   a set of values or a HyperLogLog
local function merge_distinct(old, delta)
  local scratch, other = KEYS[#KEYS - 1], KEYS[#KEYS]
  if old then
    redis.call('SET', scratch, old)
  else
    redis.call('DEL', scratch)
  end
  local r
  if string.byte(delta, 1) == 3 then
    local ok, values = pcall(cmsgpack.unpack, string.sub(delta, 2))
    if not ok or type(values) ~= 'table' then
      redis.call('DEL', scratch)
      return redis.error_reply('TALLY_FAILED distinct: the delta is not a set of values')
    end
    r = redis.pcall('PFADD', scratch, unpack(values))
  elseif string.sub(delta, 1, 4) == 'HYLL' then
    redis.call('SET', other, delta)
    r = redis.pcall('PFMERGE', scratch, other)
    redis.call('DEL', other)
  else
    redis.call('DEL', scratch)
    return redis.error_reply('TALLY_FAILED distinct: the delta is not a set of values')
  end
  if type(r) == 'table' and r.err then
    redis.call('DEL', scratch)
    return redis.error_reply('TALLY_FAILED distinct: the stored value is not a HyperLogLog')
  end
  local new = redis.call('GET', scratch)
  redis.call('DEL', scratch)
  return new
end

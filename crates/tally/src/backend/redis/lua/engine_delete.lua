-- Deletes a series of any space: its hashes and its registry entries,
-- atomically.
--
-- KEYS[1]: the registry; KEYS[2..]: the series' hashes.
-- ARGV: the registry members to remove.
-- Returns the number of hashes deleted.
local deleted = 0
if #KEYS > 1 then
  deleted = redis.call('DEL', unpack(KEYS, 2))
end
redis.call('ZREM', KEYS[1], unpack(ARGV))
return deleted

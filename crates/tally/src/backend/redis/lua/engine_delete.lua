-- Deletes a series of any space: its hashes and its registry entries,
-- atomically.
--
-- ARGV[1]: r, the number of registry keys (1; 2 in the expiring layout,
-- whose `ends@e` follows the registry).
-- KEYS[1..r]: the registry keys; KEYS[r+1..]: the series' hashes.
-- ARGV[2..]: the members to remove from each registry key.
-- Returns the number of hashes deleted.
local r = tonumber(ARGV[1])
local deleted = 0
if #KEYS > r then
  deleted = redis.call('DEL', unpack(KEYS, r + 1))
end
for i = 1, r do
  redis.call('ZREM', KEYS[i], unpack(ARGV, 2))
end
return deleted

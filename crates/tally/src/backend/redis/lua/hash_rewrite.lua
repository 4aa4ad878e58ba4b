-- hash_rewrite.lua: a hash rewritten in one step, for the cleaner's first
-- pass when it removes many fields from one listpack (each HDEL of a field
-- scans the listpack from its head and moves its tail: quadratic there).
-- KEYS[1]: the hash; KEYS[2]: a key of the same slot where the cleaner
-- has just RESTOREd the fields the hash keeps, with a time to live (the
-- payload does not pass through Lua, which hashes every byte of a string
-- it makes). ARGV[1]: the hash's DUMP payload as the cleaner read it;
-- ARGV[2]: how many fields the rewrite removes. Moves KEYS[2] onto the
-- hash, which keeps its own time to live, and answers that number; or,
-- when the hash is no longer what was read (a write landed since: the
-- cleaner then removes the fields by name) or KEYS[2] is missing (its
-- RESTORE failed), deletes KEYS[2] and answers -1, the hash unchanged.
if redis.call('DUMP', KEYS[1]) ~= ARGV[1] or redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[2])
  return -1
end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('RENAME', KEYS[2], KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('PERSIST', KEYS[1])
end
return tonumber(ARGV[2])

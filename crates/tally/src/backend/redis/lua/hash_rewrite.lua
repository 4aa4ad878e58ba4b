-- hash_rewrite.lua: a hash rewritten in one step, for the cleaner's first
-- pass when it removes many fields from one listpack (each HDEL of a field
-- scans the listpack from its head and moves its tail: quadratic there).
-- KEYS[1]: the hash. ARGV[1]: its DUMP payload as the cleaner read it;
-- ARGV[2]: the payload of the fields it keeps, to RESTORE; ARGV[3]: how
-- many fields that removes. Answers that number, or -1, having changed
-- nothing, when the hash is no longer what was read (a write landed since:
-- the cleaner then removes the fields by name) or the server refuses the
-- RESTORE (out of memory, say). The hash keeps its time to live.
if redis.call('DUMP', KEYS[1]) ~= ARGV[1] then
  return -1
end
local ttl = redis.call('PTTL', KEYS[1])
local r = redis.pcall('RESTORE', KEYS[1], ttl > 0 and ttl or 0, ARGV[2], 'REPLACE')
if type(r) == 'table' and r.err then
  return -1
end
return tonumber(ARGV[3])

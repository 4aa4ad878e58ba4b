-- Releases a claim whose batch is in SQL. Idempotent.
--
-- KEYS[1]  the shard's claims sorted set
-- KEYS[2]  the claim hash
-- KEYS[3]  the shard's in-flight hash
-- ARGV[1]  the batch id
--
-- Clears the in-flight marks that still name this batch (a later claim of
-- the same row is left alone). Returns the number of rows in the claim.
local members = redis.call('HKEYS', KEYS[2])
for _, m in ipairs(members) do
  if redis.call('HGET', KEYS[3], m) == ARGV[1] then
    redis.call('HDEL', KEYS[3], m)
  end
end
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return #members

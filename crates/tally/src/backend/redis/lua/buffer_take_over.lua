-- Takes over a claim whose lease has expired, renewing the lease, so exactly
-- one caller gets it.
--
-- KEYS[1]  the shard's claims sorted set
-- KEYS[2]  the claim hash
-- ARGV[1]  now, Unix ms
-- ARGV[2]  the new lease deadline, Unix ms
-- ARGV[3]  the batch id
--
-- Returns the claim's contents (row id, changes, ...) or nil when the claim
-- is gone or its lease has not expired.
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[3])
if not deadline or tonumber(deadline) > tonumber(ARGV[1]) then
  return false
end
redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[3])
return redis.call('HGETALL', KEYS[2])

-- Extends a lock's lease only for the token that holds it.
--
-- KEYS[1]  the lock's owner key
-- ARGV[1]  the token
-- ARGV[2]  the new time to live from now, ms
--
-- Returns 1 when extended, 0 when the token does not hold the lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

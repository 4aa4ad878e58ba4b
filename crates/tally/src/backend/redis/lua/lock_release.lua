-- Releases a lock only for the token that holds it.
--
-- KEYS[1]  the lock's owner key
-- ARGV[1]  the token
--
-- Returns 1 when released, 0 when the token does not hold the lock.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0

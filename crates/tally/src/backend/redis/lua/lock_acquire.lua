-- Takes a lock with a lease and a fencing number, atomically.
--
-- KEYS[1]  the lock's owner key ({tag}:owner), holding the holder's token
-- KEYS[2]  the lock's fence key ({tag}:fence), a counter that never expires
-- ARGV[1]  our token
-- ARGV[2]  time to live, ms
--
-- Returns {1, fence} when taken, {0, ms left on the holder's lease} when held
-- by another token, {2, fence, ms left} when our token holds it already (a
-- keyed acquisition sent again: nothing changes).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  left = 0
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {2, tonumber(redis.call('GET', KEYS[2]) or '0'), left}
end
return {0, left}

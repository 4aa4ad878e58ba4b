-- Completes or releases a claim on an idempotency key, if the claim still
-- holds it (see idempotency/store.rs).
--
-- KEYS[1]  the record (see idem_claim.lua)
-- ARGV[1]  the claim's token
-- ARGV[2]  'complete' (record the answer) or 'release' (remove the record)
-- ARGV[3..5] for 'complete': status, headers (JSON), body
--
-- Returns 1 when the claim held the key and the step was done, else 0.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
if ARGV[2] == 'release' then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'headers', ARGV[4], 'body', ARGV[5])
redis.call('HDEL', KEYS[1], 'lease')
return 1

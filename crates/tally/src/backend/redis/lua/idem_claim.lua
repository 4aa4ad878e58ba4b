-- Claims an idempotency key in one step (see idempotency/store.rs).
--
-- KEYS[1]  the record: a hash of fp (the request's fingerprint), token (the
--          claim holding it), lease (Unix ms when that claim's lease ends)
--          and, once answered, status, headers and body
-- ARGV[1]  the fingerprint
-- ARGV[2]  this claim's token
-- ARGV[3]  now, Unix ms (the caller's clock)
-- ARGV[4]  the lease, ms
-- ARGV[5]  the retention, ms (the record's PX, set when it is made)
-- ARGV[6]  '1' when the answer follows (recorded with the claim), else '0'
-- ARGV[7..9] status, headers (JSON), body
--
-- A claim sent again with its token finds itself: {'claimed'}.
-- Returns {'claimed'}, {'mismatch'}, {'busy', ms until the lease ends} or
-- {'done', status, headers, body}.
local fp = redis.call('HGET', KEYS[1], 'fp')
local now = tonumber(ARGV[3])
if fp then
  if fp ~= ARGV[1] then
    return {'mismatch'}
  end
  local got = redis.call('HMGET', KEYS[1], 'status', 'headers', 'body', 'lease', 'token')
  if got[5] == ARGV[2] then
    -- This very claim, sent again (its first answer was lost on the way).
    return {'claimed'}
  end
  if got[1] then
    return {'done', got[1], got[2], got[3]}
  end
  local lease = tonumber(got[4] or '0')
  if lease > now then
    return {'busy', tostring(lease - now)}
  end
  -- The claim holding it died: this one takes it over.
else
  redis.call('HSET', KEYS[1], 'fp', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
redis.call('HSET', KEYS[1], 'token', ARGV[2], 'lease', tostring(now + tonumber(ARGV[4])))
if ARGV[6] == '1' then
  redis.call('HSET', KEYS[1], 'status', ARGV[7], 'headers', ARGV[8], 'body', ARGV[9])
end
return {'claimed'}

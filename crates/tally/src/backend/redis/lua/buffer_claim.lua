-- Moves pending rows into a new claim, atomically.
--
-- KEYS[1]  the shard's pending sorted set
-- KEYS[2]  the shard's in-flight hash (row id -> batch id of its live claim)
-- KEYS[3]  the shard's claims sorted set (batch id -> lease deadline, ms)
-- KEYS[4]  the claim hash (row id -> the row's changes, a flat JSON array)
-- KEYS[5 ..]  the candidate rows' hashes, in the order of ARGV[3 ..]
-- ARGV[1]  the lease deadline, Unix ms
-- ARGV[2]  the batch id
-- ARGV[3 ..]  candidate row ids (read from the pending set just before)
--
-- A candidate is claimed only if it is still pending and not in another live
-- claim (so one row's batches reach SQL in order). Returns the claimed rows
-- as a flat array: row id, changes, row id, changes, ...
local out = {}
for i = 3, #ARGV do
  local member = ARGV[i]
  local row = KEYS[i + 2]
  if redis.call('ZSCORE', KEYS[1], member) and redis.call('HEXISTS', KEYS[2], member) == 0 then
    local flat = redis.call('HGETALL', row)
    redis.call('ZREM', KEYS[1], member)
    if #flat > 0 then
      local data = cjson.encode(flat)
      redis.call('HSET', KEYS[4], member, data)
      redis.call('HSET', KEYS[2], member, ARGV[2])
      redis.call('DEL', row)
      out[#out + 1] = member
      out[#out + 1] = data
    end
  end
end
if #out > 0 then
  redis.call('ZADD', KEYS[3], ARGV[1], ARGV[2])
end
return out

-- pending_read.lua: what a read of many series needs of their pending
-- slices (stats_fold.lua), in one call. KEYS: the pending slices. ARGV:
-- none for statistics, whose slices are read whole (HGETALL), else the
-- fields read of each (HMGET). Most series have no pending slice (only a
-- busy one does), so each run of RUN keys is looked up with one EXISTS
-- first, and only the keys of a run where one exists are read. Answers
-- i1, reply1, i2, reply2, ...: the position in KEYS (from 1) and the
-- command's reply of each key read; a key it does not name has no
-- pending slice. (A reply per key, even an empty one, would cost Redis
-- more than the lookups save.)
local RUN = 32
local out = {}
local from = 1
while from <= #KEYS do
  local to = math.min(from + RUN - 1, #KEYS)
  if redis.call('EXISTS', unpack(KEYS, from, to)) > 0 then
    for i = from, to do
      out[#out + 1] = i
      if #ARGV == 0 then
        out[#out + 1] = redis.call('HGETALL', KEYS[i])
      else
        out[#out + 1] = redis.call('HMGET', KEYS[i], unpack(ARGV))
      end
    end
  end
  from = to + 1
end
return out

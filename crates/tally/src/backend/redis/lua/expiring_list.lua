-- Lists one shard's series in the expiring layout, after forgetting those
-- whose data has all expired.
--
-- KEYS[1]: the shard's registry (`names@e`, names at score 0);
-- KEYS[2]: its `ends@e` (name -> end score).
-- ARGV[1], ARGV[2]: the ZRANGEBYLEX bounds; ARGV[3]: the most names to
-- return; ARGV[4]: the end score below which a series has expired.
--
-- First forgets up to 1000 expired series (ZRANGEBYSCORE on `ends@e`, so
-- the cost follows what is removed, never the samples), then returns the
-- names in the range, in name order, skipping any whose end passed that
-- were not forgotten yet (more than 1000 expired at once).
local below = ARGV[4]
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. below, 'LIMIT', 0, 1000)
if #gone > 0 then
  redis.call('ZREM', KEYS[2], unpack(gone))
  redis.call('ZREM', KEYS[1], unpack(gone))
end
local limit = tonumber(ARGV[3])
local out = {}
local min = ARGV[1]
local floor = tonumber(below)
while #out < limit do
  local want = math.min(limit - #out, 1000)
  local names = redis.call('ZRANGEBYLEX', KEYS[1], min, ARGV[2], 'LIMIT', 0, want)
  if #names == 0 then break end
  local scores = redis.call('ZMSCORE', KEYS[2], unpack(names))
  for i = 1, #names do
    if scores[i] and tonumber(scores[i]) >= floor then
      out[#out + 1] = names[i]
    end
  end
  if #names < want then break end
  min = '(' .. names[#names]
end
return out

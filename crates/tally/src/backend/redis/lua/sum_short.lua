-- The short call of a busy counter's increment (sum_pending.lua before
-- this), sent when the client last saw the counter's pending slice at
-- this write's slice: KEYS the lane's record (when ARGV[1] is '1') and the
-- pending slice; ARGV[1] '1' or '0', the write's sequence number, the
-- finest precision, the finest slice's field and the delta (texts).
-- Answers as sum_pending, or 3 when it wrote nothing and the client must
-- send the full call.
local lane = ARGV[1] == '1' and KEYS[1] or nil
local done = sum_pending(lane, ARGV[2], KEYS[#KEYS], ARGV[3], ARGV[4], ARGV[5])
if done then
  return done
end
return 3

-- The busy counter's increment, before anything else of the sums' apply
-- script (engine_apply.lua) is defined: a call of one series through its
-- pending slice (ARGV[1] '4' or '5') is first offered to sum_pending
-- (sum_pending.lua, before this), without the script's functions and
-- tables being made. Anything it does not decide (another slice, a delta
-- or count past 16 characters, several series, a registry to update)
-- falls through to the full path, which decides it from the start.
-- sum_fast_tests in engine/ runs both paths on the same calls and
-- compares what they leave.
do
  local flag = ARGV[1]
  if flag == '4' or flag == '5' then
    local marker = flag == '5' and 1 or 0
    local np = tonumber(ARGV[5])
    -- The one entry, of n = h hashes, then one registry of one member
    -- vouched for by the series' last hash (the full path's `held`).
    local at = 6 + np
    local n, after = ARGV[at + 1], at + 3 + np
    if ARGV[at] ~= '0' and n == ARGV[4] and #ARGV == after + 2 and ARGV[after] == '1'
        and tonumber(ARGV[after + 2]) == marker + tonumber(n) then
      local done = sum_pending(marker == 1 and KEYS[1] or nil, ARGV[2],
        KEYS[tonumber(ARGV[at])], ARGV[6], ARGV[at + 3], ARGV[at + 2])
      if done then
        return done
      end
    end
  end
end

-- The busy counter's increment, before anything else of the sums' apply
-- script (engine_apply.lua) is defined: a call of one series through its
-- pending slice (ARGV[1] '4' or '5') whose finest slice is the one pending
-- adds its delta to the pending count and answers, as the full path would,
-- without making the script's functions and tables first. Anything else
-- (another slice, a delta or count past SUM_SMALL's 16 characters, several
-- series, a registry to update, a failed HINCRBY, which changes nothing)
-- falls through to the full path, which decides it from the start.
-- sum_fast_tests in engine/protocol_tests.rs runs both paths on the same
-- calls and compares what they leave.
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
      if marker == 1 and tonumber(ARGV[2]) <= tonumber(redis.call('GET', KEYS[1]) or '0') then
        return 0
      end
      local pend, delta, field = KEYS[tonumber(ARGV[at])], ARGV[at + 2], ARGV[at + 3]
      local cur = redis.call('HMGET', pend, 's', 'b', 't')
      -- As fold_same decides: the same finest field, `t` starting with the
      -- finest precision and that field, then the sizes.
      local head, t = ARGV[6] .. ':' .. field, cur[3] or ''
      if cur[1] == field and (t == head or string.sub(t, 1, #head + 1) == head .. ' ') then
        if #delta <= 16 and #cur[2] <= 16 then
          local r = redis.pcall('HINCRBY', pend, 'b', delta)
          if not (type(r) == 'table' and r.err) then
            if marker == 1 then
              redis.call('SET', KEYS[1], ARGV[2], 'EX', 604800)
            end
            return 1
          end
        end
      end
    end
  end
end

-- The increment of one counter, before anything else of the sums' apply
-- script (engine_apply.lua) is defined: a call of one series through its
-- pending slice (ARGV[1] '4' or '5') is first offered to sum_pending
-- (sum_pending.lua, before this), without the script's functions and
-- tables being made. When the counter has no pending slice (a new
-- counter, or one written once a slice: most of a million sparse ones),
-- the write is what the full path's fold_sum_open does without a fold:
-- each precision's cell by HINCRBY, the pending slice opened at 0 when the
-- finest cell held something (not past SUM_OPEN), the member registered
-- when the coarsest did not, the lane's record set. Anything else (another
-- slice, a delta or count past 16 characters, a delta of 0, several
-- series, an error of a HINCRBY, whose cells are first taken back) falls
-- through to the full path, which decides it from the start.
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
      local pend, delta = KEYS[tonumber(ARGV[at])], ARGV[at + 2]
      local done, cur = sum_pending(marker == 1 and KEYS[1] or nil, ARGV[2],
        pend, ARGV[6], ARGV[at + 3], delta)
      if done then
        return done
      end
      if cur and not cur[1] and delta ~= '0' and tonumber(n) == np then
        -- KEYS[marker + 1 + j] and field ARGV[at + 3 + j]: precision j's
        -- cell; r, what the last HINCRBY left; first, the finest's.
        local h, d = tonumber(n), tonumber(delta)
        local r, first, big, j = nil, nil, false, 0
        while j < h do
          r = redis.pcall('HINCRBY', KEYS[marker + 1 + j], ARGV[at + 3 + j], delta)
          if type(r) == 'table' then
            break
          end
          first = first or r
          big = big or r >= 9e17 or r <= -9e17
          j = j + 1
        end
        if j == h then
          local opened = not big and first ~= d
          if opened then
            local t = {}
            for i = 0, h - 1 do
              t[i + 1] = ARGV[6 + i] .. ':' .. ARGV[at + 3 + i]
            end
            redis.call('HSET', pend, 's', ARGV[at + 3], 'b', '0', 't', table.concat(t, ' '))
          end
          if r == d then
            redis.call('ZADD', KEYS[marker + h + 1], 0, ARGV[after + 1])
          end
          if marker == 1 then
            redis.call('SET', KEYS[1], ARGV[2], 'EX', 604800)
          end
          return opened and 2 or 1
        end
        -- Taken back (as engine_undo.lua's take_back) for the full path.
        local back = string.sub(delta, 1, 1) == '-' and string.sub(delta, 2) or '-' .. delta
        for i = 0, j - 1 do
          local key, field = KEYS[marker + 1 + i], ARGV[at + 3 + i]
          if redis.call('HINCRBY', key, field, back) == 0 then
            redis.call('HDEL', key, field)
          end
        end
      end
    end
  end
end

-- The sums' HINCRBY loop, written once and spliced by the Rust side
-- (engine/kinds.rs) into engine_apply.lua at each of its lines that names
-- this file after `-- @`: a Lua function would cost Redis 3 to 4 % more
-- per increment (one call per hash, measured by callgrind). It reads and
-- sets the locals of the place it stands in: adds hash `key`'s m (field,
-- delta) pairs from ARGV[at], counting them in `done`, `r` the last
-- HINCRBY's answer; on an error, j (the failed pair, from 0) and e (its
-- message); with `check`, a count past SUM_BIG in magnitude stops it,
-- e = CHECK.
while done < m do
  r = redis.pcall('HINCRBY', key, ARGV[at], ARGV[at + 1])
  if type(r) == 'table' then
    j, e = done, r.err
    break
  end
  at, done = at + 2, done + 1
  if check and (r >= SUM_BIG or r <= -SUM_BIG) then
    j, e = done, CHECK
    break
  end
end

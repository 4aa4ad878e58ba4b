-- Fold on close: the finest precision's slice only; when a write opens a
-- new finest slice, the pending one is folded into the coarser ones.
for i = 1, #KEYS do
  local d = delta_of(value(i))
  local fin, mark = KEYS[i] .. ':1', KEYS[i] .. ':pend'
  local pend = redis.call('GET', mark)
  local s = now
  if pend and tonumber(pend) == s then
    merge_into(fin, tostring(s), d)
  elseif (not pend) or tonumber(pend) < s then
    if pend then
      local blob = redis.call('HGET', fin, pend)
      local ps = tonumber(pend)
      if blob then
        for j = 2, #P do
          merge_into(KEYS[i] .. ':' .. P[j], tostring(ps - ps % P[j]), blob)
        end
      end
    end
    redis.call('SET', mark, s)
    merge_into(fin, tostring(s), d)
  else
    for _, p in ipairs(P) do
      merge_into(KEYS[i] .. ':' .. p, tostring(s - s % p), d)
    end
  end
end
return 1

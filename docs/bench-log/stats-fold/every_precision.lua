-- Today's design: every precision's open slice per observation.
for i = 1, #KEYS do
  local d = delta_of(value(i))
  for _, p in ipairs(P) do
    merge_into(KEYS[i] .. ':' .. p, tostring(now - now % p), d)
  end
end
return 1

-- Renew a consumer's entries (their idle time reset); returns the ids still its own.
-- KEYS: stream; ARGV: group, consumer, entry ids...
local kept = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    table.insert(kept, ARGV[i])
  end
end
return kept

-- Put a job the caller owns back as queued, runnable again only after a delay: it leaves the
-- stream for the delayed set (score: its not-before time on Redis' clock), so no worker holds it
-- (or sleeps on it) meanwhile. Returns the not-before time, or false when it was not the caller's.
-- KEYS: job, stream, delayed
-- ARGV: group, entry, owner, job_id, delay_s, created_epoch, field, value, ...
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[3] then return false end
local not_before = now_s() + tonumber(ARGV[5])
redis.call('HSET', KEYS[1], unpack(ARGV, 7))
redis.call('HSET', KEYS[1], 'not_before', tostring(not_before), 'created_epoch', ARGV[6])
drop_entry(KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], not_before, ARGV[4])
return tostring(not_before)

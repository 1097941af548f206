-- A running job's progress (GET /jobs/{id}'s "progress"); nothing once the job has ended.
-- KEYS: job; ARGV: progress JSON  -> 1 when written
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'progress', ARGV[1])
return 1

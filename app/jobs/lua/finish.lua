-- End a job (succeeded or failed) if the caller still owns it: {1, the bytes of storage it had
-- reserved}; 0 when another worker took it over.
-- KEYS: job, stream, input, hooks, dead, storage reservations
-- ARGV: group, entry, owner, job_ttl, job_id, dead_letter ('1'/'0'), field, value, ...
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 7))
drop_entry(KEYS[2], ARGV[1], ARGV[2])
if ARGV[6] == '1' then dead_letter(KEYS[5], ARGV[5]) end
return {1, end_job(KEYS[1], KEYS[3], KEYS[4], ARGV[4], ARGV[5], KEYS[6])}

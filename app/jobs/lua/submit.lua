-- Queue a job, atomically with its idempotency record, under the queue bound (jobs in the stream
-- plus jobs waiting out a retry delay).
-- KEYS: stream, job, input, idem ('' = none), delayed
-- ARGV: max_queued, job_id, idem_record, idem_ttl, job_ttl, input, has_input, created_epoch, field, value, ...
if KEYS[4] ~= '' then
  local prev = redis.call('GET', KEYS[4])
  if prev then return {'duplicate', prev} end
end
if redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[1]) then return {'full', ''} end
redis.call('HSET', KEYS[2], unpack(ARGV, 9))
redis.call('EXPIRE', KEYS[2], ARGV[5])
if ARGV[7] == '1' then redis.call('SET', KEYS[3], ARGV[6], 'EX', ARGV[5]) end
local entry = redis.call('XADD', KEYS[1], '*', 'job', ARGV[2], 'created', ARGV[8])
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], ARGV[3], 'EX', ARGV[4]) end
return {'queued', entry}

-- Queue a job, atomically with its idempotency record, under the queue bound (jobs in both streams
-- plus jobs waiting out a retry delay) and under its client's shares (app/shares.py): jobs queued,
-- running or whose callback is still to be delivered, bytes of queued or running jobs' inputs, videos.
-- A client's unfinished jobs are a sorted set (member: job
-- id, score: input bytes) and its videos another; jobs that ended are dropped from them here.
-- The storage the job will use (its price, app/jobs/price.py) is reserved in the pod's reservations
-- (member: job id, score: bytes), held until the job ends (prelude.lua's end_job).
-- KEYS: stream, job, input, idem ('' = none), delayed, other stream, other delayed, client jobs, client videos,
--       storage reservations
-- ARGV: max_queued, job_id, idem_record, idem_ttl, job_ttl, input, has_input, created_epoch,
--       client_max_jobs, client_max_bytes, client_max_videos, input_bytes, is_video ('1'/'0'),
--       job key prefix, reserved bytes, field, value, ...
if KEYS[4] ~= '' then
  local prev = redis.call('GET', KEYS[4])
  if prev then return {'duplicate', prev} end
end
local unfinished = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[5])
  + redis.call('XLEN', KEYS[6]) + redis.call('ZCARD', KEYS[7])
if unfinished >= tonumber(ARGV[1]) then return {'full', ''} end
local jobs, queued_bytes = 0, 0
local members = redis.call('ZRANGE', KEYS[8], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  local state = redis.call('HMGET', ARGV[14] .. members[i], 'status', 'webhook_status')
  if state[1] == 'queued' or state[1] == 'running' then
    jobs = jobs + 1
    queued_bytes = queued_bytes + tonumber(members[i + 1])
  elseif state[2] == 'pending' then  -- ended, its callback not yet delivered: it still holds a lane's turn
    jobs = jobs + 1
    redis.call('ZREM', KEYS[9], members[i])
  else
    redis.call('ZREM', KEYS[8], members[i])
    redis.call('ZREM', KEYS[9], members[i])
  end
end
if jobs >= tonumber(ARGV[9]) then return {'jobs_share', tostring(jobs)} end
if queued_bytes + tonumber(ARGV[12]) > tonumber(ARGV[10]) then return {'bytes_share', tostring(queued_bytes)} end
if ARGV[13] == '1' and redis.call('ZCARD', KEYS[9]) >= tonumber(ARGV[11]) then
  return {'video_share', tostring(redis.call('ZCARD', KEYS[9]))}
end
redis.call('HSET', KEYS[2], unpack(ARGV, 16))
redis.call('EXPIRE', KEYS[2], ARGV[5])
if ARGV[7] == '1' then redis.call('SET', KEYS[3], ARGV[6], 'EX', ARGV[5]) end
local entry = redis.call('XADD', KEYS[1], '*', 'job', ARGV[2], 'created', ARGV[8])
if KEYS[4] ~= '' then redis.call('SET', KEYS[4], ARGV[3], 'EX', ARGV[4]) end
redis.call('ZADD', KEYS[8], tonumber(ARGV[12]), ARGV[2])
redis.call('EXPIRE', KEYS[8], ARGV[5])
if ARGV[13] == '1' then
  redis.call('ZADD', KEYS[9], 0, ARGV[2])
  redis.call('EXPIRE', KEYS[9], ARGV[5])
end
if tonumber(ARGV[15]) > 0 then
  redis.call('HSET', KEYS[2], 'reserved', ARGV[15])
  redis.call('ZADD', KEYS[10], tonumber(ARGV[15]), ARGV[2])
end
return {'queued', entry}

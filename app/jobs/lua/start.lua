-- Count an attempt and make the consumer the job's owner; or say why the job is not run
-- (gone, done, or dead: its attempts used up by workers that stopped).
-- A dead job's answer also holds the bytes of storage it had reserved, and its client.
-- KEYS: job, stream, input, hooks, dead, storage reservations
-- ARGV: group, entry, consumer, max_attempts, now, dead_error_json, job_id, job_ttl
if redis.call('EXISTS', KEYS[1]) == 0 then drop_entry(KEYS[2], ARGV[1], ARGV[2]); return {'gone', ''} end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'succeeded' or status == 'failed' then drop_entry(KEYS[2], ARGV[1], ARGV[2]); return {'done', ''} end
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
if attempts > tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[6], 'updated', ARGV[5], 'owner', '',
             'attempts', ARGV[4])
  drop_entry(KEYS[2], ARGV[1], ARGV[2])
  dead_letter(KEYS[5], ARGV[7])
  local held = end_job(KEYS[1], KEYS[3], KEYS[4], ARGV[8], ARGV[7], KEYS[6])
  return {'dead', ARGV[4], held, redis.call('HGET', KEYS[1], 'client') or ''}
end
local owner = ARGV[3] .. '/' .. attempts
redis.call('HSET', KEYS[1], 'status', 'running', 'owner', owner, 'updated', ARGV[5], 'started', ARGV[5])
redis.call('HDEL', KEYS[1], 'not_before')
return {'run', owner}

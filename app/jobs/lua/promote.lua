-- Move the delayed jobs whose not-before time has come back into the stream (oldest first, at most
-- ARGV[2]); a job that ended or expired meanwhile is dropped. Returns how many were moved.
-- KEYS: delayed, stream; ARGV: job key prefix, most
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_s(), 'LIMIT', 0, tonumber(ARGV[2]))
local moved = 0
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local job = ARGV[1] .. id
  if redis.call('HGET', job, 'status') == 'queued' then
    redis.call('XADD', KEYS[2], '*', 'job', id, 'created', redis.call('HGET', job, 'created_epoch') or '0')
    moved = moved + 1
  end
end
return moved

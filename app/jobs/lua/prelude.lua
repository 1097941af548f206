-- Shared by the scripts that end a job: drop its stream entry, its input, give the record its TTL,
-- and queue the webhook if the job has a callback.
local DEAD_STREAM_MAX = 10000  -- the dead-letter stream keeps about this many entries

local function drop_entry(stream, group, entry)
  redis.call('XACK', stream, group, entry)
  redis.call('XDEL', stream, entry)
end

local function dead_letter(dead, id)
  redis.call('XADD', dead, 'MAXLEN', '~', DEAD_STREAM_MAX, '*', 'job', id)
end

-- The job's storage reservation (bytes; 0 when none or given back already) leaves the pod's
-- reservations: the caller gives it back to the client's share once, here.
local function end_job(job, input, hooks, ttl, id, reserved)
  local held = redis.call('ZSCORE', reserved, id)
  if held then redis.call('ZREM', reserved, id) end
  redis.call('DEL', input)
  redis.call('EXPIRE', job, ttl)
  if (redis.call('HGET', job, 'callback_url') or '') ~= '' then
    redis.call('HSET', job, 'webhook_status', 'pending')
    redis.call('XADD', hooks, '*', 'job', id)
  end
  return held or '0'
end

-- Redis' own clock (seconds, float): one clock for every worker's not-before times.
local function now_s()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

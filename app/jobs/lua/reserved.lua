-- The bytes of storage the pod's unfinished jobs have reserved (their prices, app/jobs/price.py): what
-- the pod's storage budget counts beside what is stored. A reservation whose job ended or expired
-- without giving it back (a worker of before the reservations ended it) is dropped here.
-- KEYS: storage reservations; ARGV: job key prefix
local total = 0
local held = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #held, 2 do
  local status = redis.call('HGET', ARGV[1] .. held[i], 'status')
  if status == 'queued' or status == 'running' then
    total = total + tonumber(held[i + 1])
  else
    redis.call('ZREM', KEYS[1], held[i])
  end
end
return total

-- The render stream's next job, by clients' turns (issue 41 S4): among the entries never delivered,
-- the oldest of the client served longest ago (a client not served since its queue last emptied
-- first; ties: the oldest entry), skipping the clients the caller names (those whose jobs hold their
-- render share of its slots). The entry is then delivered to the consumer (XCLAIM FORCE puts it in the
-- group's pending list, as XREADGROUP would) and the client goes to the back of the turns; a client
-- with no entry left leaves them. With ARGV[4] = '1' nothing changes: it only says whether there is one.
-- The stream holds at most DOODLEPOD_JOBS_MAX_QUEUED entries, so one pass over it is bounded.
-- KEYS: stream, turns (sorted set: client -> turn number), turn counter
-- ARGV: group, consumer, job key prefix, peek ('1'/'0'), job ttl, skipped client, ...
-- Returns {entry id, job id, client} or false.
local pending = {}
for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000)) do pending[p[1]] = true end
local skipped = {}
for i = 6, #ARGV do skipped[ARGV[i]] = true end
local best, best_job, best_who, best_rank
local left = {}   -- client -> entries never delivered
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local id, f = e[1], e[2]
  if not pending[id] then
    local job = ''
    for i = 1, #f, 2 do if f[i] == 'job' then job = f[i + 1] end end
    local who = redis.call('HGET', ARGV[3] .. job, 'client') or ''
    left[who] = (left[who] or 0) + 1
    if left[who] == 1 and not skipped[who] then
      local rank = tonumber(redis.call('ZSCORE', KEYS[2], who) or '0')
      if best == nil or rank < best_rank then best, best_job, best_who, best_rank = id, job, who, rank end
    end
  end
end
if best == nil then return false end
if ARGV[4] == '1' then return {best, best_job, best_who} end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, best, 'FORCE', 'JUSTID')
-- a worker of before the turns reads with XREADGROUP '>': it must not be handed what is delivered here
redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], '$')
if left[best_who] > 1 then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), best_who)
  redis.call('EXPIRE', KEYS[2], ARGV[5])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
else
  redis.call('ZREM', KEYS[2], best_who)
end
return {best, best_job, best_who}

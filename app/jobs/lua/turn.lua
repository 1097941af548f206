-- The render stream's next job, by clients' turns (issue 41 S4): among the entries never delivered,
-- the oldest of the client served least so far (a client not served since its queue last emptied
-- first; ties: the client served longest ago, then the oldest entry), skipping the clients the caller names (those whose jobs hold their
-- render share of its slots). The entry is then delivered to the consumer (XCLAIM FORCE puts it in the
-- group's pending list, as XREADGROUP would) and the client's count goes up by the job's render CPU
-- price (its 'cost' field, app/jobs/price.py; 1 when it has none), counted from where the turns stand
-- (the lowest count) for a client that had left them: a client of large renders is served fewer of them
-- than a client of small ones. A client with no entry left leaves the turns. With ARGV[4] = '1' nothing
-- changes: it only says whether there is one.
-- The stream holds at most DOODLEPOD_JOBS_MAX_QUEUED entries, so one pass over it is bounded.
-- KEYS: stream, turns (sorted set: client -> CPU price served), turn counter, last turns (sorted set:
--       client -> the counter when it was last served)
-- ARGV: group, consumer, job key prefix, peek ('1'/'0'), job ttl, skipped client, ...
-- Returns {entry id, job id, client} or false.
local pending = {}
for _, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000)) do pending[p[1]] = true end
local skipped = {}
for i = 6, #ARGV do skipped[ARGV[i]] = true end
local best, best_job, best_who, best_rank, best_last
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
      local last = tonumber(redis.call('ZSCORE', KEYS[4], who) or '0')
      if best == nil or rank < best_rank or (rank == best_rank and last < best_last) then
        best, best_job, best_who, best_rank, best_last = id, job, who, rank, last
      end
    end
  end
end
if best == nil then return false end
if ARGV[4] == '1' then return {best, best_job, best_who} end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, best, 'FORCE', 'JUSTID')
-- a worker of before the turns reads with XREADGROUP '>': it must not be handed what is delivered here
redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], '$')
if left[best_who] > 1 then
  local base = redis.call('ZSCORE', KEYS[2], best_who)
  if not base then
    local lowest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    base = lowest[2] or '0'
  end
  local cost = tonumber(redis.call('HGET', ARGV[3] .. best_job, 'cost') or '') or 1
  redis.call('ZADD', KEYS[2], tonumber(base) + math.max(cost, 0.001), best_who)
  redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[3]), best_who)
  for _, key in ipairs({KEYS[2], KEYS[3], KEYS[4]}) do redis.call('EXPIRE', key, ARGV[5]) end
else
  redis.call('ZREM', KEYS[2], best_who)
  redis.call('ZREM', KEYS[4], best_who)
end
return {best, best_job, best_who}

-- Take `cost` tokens from a client's bucket, refilled at `rate` per second up to `burst`, on Redis' clock.
-- KEYS: bucket; ARGV: rate (tokens per second), burst, cost -> {allowed, tokens, retry_after_s, reset_s}
local rate, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
local retry = 0
if allowed == 0 then retry = (cost - tokens) / rate end
return {allowed, tostring(tokens), tostring(retry), tostring((burst - tokens) / rate)}

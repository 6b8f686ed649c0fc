#!lua
-- The claim of a guard built WithFencing: what SET NX PX GET does, plus a fencing token drawn in
-- the same call. Declared with a shebang and no allow-oom flag, so that a full Redis
-- (noeviction) refuses it before it runs, as it refuses SET; the guard then reads the record.
-- KEYS[1]  the record
-- KEYS[2]  the key's fence counter, in the record's slot (the same {hash tag})
-- ARGV[1]  our in-progress record (the header only)
-- ARGV[2]  the claim TTL in milliseconds
-- ARGV[3]  the fence counter's TTL in milliseconds
-- Returns  the record already there (a string, nothing written), or our token (an integer).
-- The token is max(counter + 1, server time in microseconds): larger than every token drawn
-- for the key before, while the counter lives, and still larger once it is gone (expired,
-- evicted, lost in a failover) as long as the server's clock has moved forward since. Both stay
-- below 2^53, where a Lua number is exact.
local v = redis.call('GET', KEYS[1])
if v then
  return v
end
local t = redis.call('TIME')
local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if last >= token then
  token = last + 1
end
local s = string.format('%.0f', token)
redis.call('SET', KEYS[2], s, 'PX', ARGV[3])
redis.call('SET', KEYS[1], ARGV[1] .. s, 'PX', ARGV[2])
return token

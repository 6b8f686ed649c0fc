#!lua flags=allow-oom
-- allow-oom: under maxmemory-policy noeviction a full Redis refuses new claims (the caller gets a
-- 503), but must still accept the result of work that already ran; refusing it would leave the
-- claim to expire and the work to run again on the next retry.
-- Store a result in place of our in-progress claim, only while the claim is still ours.
-- KEYS[1]  the record
-- ARGV[1]  owner prefix: version byte, kind 'P', 16-byte token (18 bytes)
-- ARGV[2]  the completed record
-- ARGV[3]  result TTL in milliseconds
-- Returns  1 stored; 2 already stored by us (a retried call whose first reply was lost, or a
--          completion sent again because too few replicas acknowledged it): the record is
--          written again as it is, keeping its TTL, so that a WAIT after this call waits for the
--          replicas to hold it; 0 the record is gone (expired, evicted, flushed); -1 another
--          owner's record.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local token = string.sub(ARGV[1], 3)
if string.sub(v, 3, 18) ~= token then
  return -1
end
if string.sub(v, 1, 18) ~= ARGV[1] then
  redis.call('SET', KEYS[1], v, 'KEEPTTL')
  return 2
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1

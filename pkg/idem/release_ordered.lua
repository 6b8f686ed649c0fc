#!lua flags=allow-oom
-- allow-oom: a full Redis must still let a failed event free its object.
-- Delete our in-progress claim of an ordered event after a failure, and our running lock of its
-- object, each only while it is still ours. The watermark is left alone: a failed event
-- supersedes nothing.
-- KEYS[1]  the event's record
-- KEYS[2]  the object's running lock
-- ARGV[1]  owner prefix: version byte, kind 'P', 16-byte token (18 bytes)
-- Returns  as release.lua: 1 deleted; 0 already gone; -1 another owner's record (left alone);
--          -2 a result we stored (never deleted: a result is final).
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, 18) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if string.sub(v, 3, 18) == string.sub(ARGV[1], 3) then
  return -2
end
return -1

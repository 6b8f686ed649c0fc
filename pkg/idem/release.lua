-- Delete our in-progress claim after a failure, only while it is still ours.
-- KEYS[1]  the record
-- ARGV[1]  owner prefix: version byte, kind 'P', 16-byte token (18 bytes)
-- Returns  1 deleted; 0 already gone; -1 another owner's record (left alone);
--          -2 a result we stored (never deleted: a result is final).
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

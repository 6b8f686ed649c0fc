#!lua
-- The claim of an event ordered among the events of its object (DoOrdered, Item.Order): what
-- SET NX PX GET does for the event's record, plus the object's checks, in one call. Declared with
-- a shebang and no allow-oom flag, so that a full Redis (noeviction) refuses it before it runs,
-- as it refuses SET; the guard then reads the record. Every key shares the object's hash tag.
-- KEYS[1]  the event's record
-- KEYS[2]  the object's running lock
-- KEYS[3]  the object's watermark: the Version of its newest event that completed
-- ARGV[1]  our in-progress record (the header only; its first 18 bytes are our owner prefix)
-- ARGV[2]  the claim TTL in milliseconds
-- ARGV[3]  the event's Version, in decimal
-- ARGV[4]  the header of our superseded marker (kind 'S', our token, the result expiry)
-- ARGV[5]  the result TTL in milliseconds
-- Returns  a string: the event's record already there (nothing written), or the superseded
--          marker just written in its place (the watermark is newer than the event); 0: the
--          record and the lock are ours; a positive integer: another event of the object holds
--          the lock, for that many more milliseconds (nothing written).
-- Versions are compared as decimal strings, exactly over the whole int64 range (a Lua number
-- is exact only below 2^53).
local function valid(s)
  return string.find(s, '^%-?[1-9]%d*$') ~= nil or s == '0'
end
local function older(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then
    return na
  end
  if #a ~= #b then
    return (#a < #b) ~= na
  end
  return a ~= b and ((a < b) ~= na)
end

local v = redis.call('GET', KEYS[1])
if v then
  return v
end
local mark = redis.call('GET', KEYS[3])
if mark then
  if not valid(mark) then
    return redis.error_reply('idem: corrupt watermark')
  end
  if older(ARGV[3], mark) then
    local s = ARGV[4] .. mark
    redis.call('SET', KEYS[1], s, 'PX', ARGV[5])
    return s
  end
end
local owner = string.sub(ARGV[1], 1, 18)
local run = redis.call('GET', KEYS[2])
if run and run ~= owner then
  return math.max(redis.call('PTTL', KEYS[2]), 1)
end
redis.call('SET', KEYS[2], owner, 'PX', ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0

#!lua flags=allow-oom
-- allow-oom: as for complete.lua, a full Redis must still accept the result of work that ran.
-- The completion of an ordered event: complete.lua's for the event's record, and, whatever the
-- record says (the work ran and succeeded, even when its claim was lost), the object's
-- watermark raised to the event's Version (kept when newer, its TTL renewed) and our running
-- lock deleted.
-- KEYS[1]  the event's record
-- KEYS[2]  the object's running lock
-- KEYS[3]  the object's watermark
-- ARGV[1]  owner prefix: version byte, kind 'P', 16-byte token (18 bytes)
-- ARGV[2]  the completed record
-- ARGV[3]  result TTL in milliseconds
-- ARGV[4]  the event's Version, in decimal
-- ARGV[5]  the watermark's TTL in milliseconds
-- Returns  as complete.lua: 1 stored; 2 already stored by us (written again as it is, keeping
--          its TTL); 0 the record is gone; -1 another owner's record.
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

local reply
local v = redis.call('GET', KEYS[1])
if not v then
  reply = 0
elseif string.sub(v, 3, 18) ~= string.sub(ARGV[1], 3) then
  reply = -1
elseif string.sub(v, 1, 18) ~= ARGV[1] then
  redis.call('SET', KEYS[1], v, 'KEEPTTL')
  reply = 2
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  reply = 1
end
local mark = redis.call('GET', KEYS[3])
if not mark or not valid(mark) or older(mark, ARGV[4]) then
  mark = ARGV[4]
end
redis.call('SET', KEYS[3], mark, 'PX', ARGV[5])
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return reply

#!lua flags=allow-oom
-- allow-oom: as for complete.lua, a full Redis must still accept the results of work that ran.
-- Finish part of a batch: store each successful item's result in place of our in-progress claim,
-- and delete each failed item's claim, each only while the claim is still ours. One call for up
-- to a hundred keys that live on one node and slot (one key per call on a cluster), with exactly
-- the per-key checks and replies of complete.lua and release.lua; no key is created.
-- KEYS[i]     the records
-- ARGV[1]     result TTL in milliseconds
-- ARGV[2]     the owner prefixes of KEYS, in order, 18 bytes each: version byte, kind 'P', token
-- ARGV[2+i]   the completed record for KEYS[i], or the empty string to release its claim
-- Returns     per key, in order: 1 stored or deleted; 0 the record is gone; -1 another owner's
--             record; 2 (complete) already stored by us, written again as it is (keeping its
--             TTL) so that a WAIT after the call covers it; -2 (release) a result we stored.
local ttl, owners = ARGV[1], ARGV[2]
-- One MGET for every record: a command called from Lua costs several times its native price.
local vals = redis.call('MGET', unpack(KEYS))
local out = {}
for i, key in ipairs(KEYS) do
  local owner = string.sub(owners, 18 * i - 17, 18 * i)
  local rec = ARGV[2 + i]
  local v = vals[i]
  if not v then
    out[i] = 0
  elseif string.sub(v, 1, 18) == owner then
    if rec == '' then
      redis.call('DEL', key)
    else
      redis.call('SET', key, rec, 'PX', ttl)
    end
    out[i] = 1
  elseif string.sub(v, 3, 18) ~= string.sub(owner, 3) then
    out[i] = -1
  elseif rec == '' then
    out[i] = -2
  else
    redis.call('SET', key, v, 'KEEPTTL')
    out[i] = 2
  end
end
return out

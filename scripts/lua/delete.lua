-- delete.lua: remove a request, its history (kept in the record), its pacing state
-- and its index entries. A retention bucket may still list it: the sweeper skips
-- entries whose record is gone (sweep.lua).
-- KEYS[1] record   KEYS[2] deadline zset   KEYS[3] pacing hash
-- KEYS[4] change channel (the record's hash tag): the deletion announces
--         "<id>,<version>" there, so that waiters and streams learn it is gone
-- ARGV[1] id   ARGV[2] now (unix ms)
-- ARGV[3] index key prefix ("<prefix>:{<tenant>}:ix:"): the request's index,
--         "<prefix><status letter>:<type>", is named from its record (same slot)
-- Constant PUBLISH: 'SPUBLISH' on a Cluster, else 'PUBLISH'.
-- Returns {0} deleted | {1} not found
local record, id = KEYS[1], ARGV[1]
local rec = rcall('GET', record)
if not rec then return {1} end
local st, typ, ex = rec_head(rec)
if gone(ex, ARGV[2]) then return {1} end
rcall('DEL', record, KEYS[3])
rcall('ZREM', ARGV[3] .. st .. ':' .. typ, id)
rcall('ZREM', KEYS[2], id)
rcall(PUBLISH, KEYS[4], id .. ',' .. string.match(rec, '^.\31([^\31]*)'))
return {0}

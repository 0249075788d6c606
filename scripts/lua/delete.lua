-- delete.lua: remove a request, its history (kept in the record) and every index entry.
-- KEYS[1] record hash   KEYS[2..7] status sets q p s f c e   KEYS[8] type set
-- KEYS[9] deadline zset KEYS[10] retention zset
-- ARGV[1] id   ARGV[2] the record's type as read by the caller   ARGV[3] now (unix ms)
-- Returns {0} deleted | {1} not found | {8} type changed under the caller: read again
local record, id = KEYS[1], ARGV[1]
local flat = rcall('HGETALL', record)
if #flat == 0 or gone(flat, ARGV[3]) then return {1} end
local typ = field(flat, 't')
if typ ~= ARGV[2] then return {8} end
rcall('DEL', record)
for i = 2, 7 do rcall('ZREM', KEYS[i], id) end
rcall('ZREM', KEYS[8], id)
rcall('ZREM', KEYS[9], id)
rcall('ZREM', KEYS[10], id .. ' ' .. typ)
return {0}

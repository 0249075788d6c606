-- delete.lua: remove a request, its history (kept in the record), its pacing state
-- and every index entry. A retention bucket may still list it: the sweeper skips
-- entries whose record is gone (sweep.lua).
-- KEYS[1] record   KEYS[2..7] status sets q p s f c e   KEYS[8] deadline zset
-- KEYS[9] pacing hash
-- ARGV[1] id   ARGV[2] now (unix ms)
-- Returns {0} deleted | {1} not found
local record, id = KEYS[1], ARGV[1]
local rec = rcall('GET', record)
if not rec then return {1} end
local st, _, ex = rec_head(rec)
if gone(ex, ARGV[2]) then return {1} end
rcall('DEL', record, KEYS[9])
for i = 2, 7 do rcall('ZREM', KEYS[i], id) end
rcall('ZREM', KEYS[8], id)
return {0}

-- webhook_register.lua: register a webhook endpoint: its description hash and its
-- entry in the tenant's filter hash (which create.lua and transition.lua read), at
-- once, unless the tenant already has the most endpoints allowed.
-- KEYS[1] endpoint hash          KEYS[2] webhook filter hash (endpoint id -> event letters)
-- KEYS[3] tenant meta hash: its "wh" field tells create.lua, in the read it makes
--         anyway, that the filter hash is worth reading
-- ARGV[1] endpoint id            ARGV[2] event letters ("q" created, "p" processing, "sfce" terminal)
-- ARGV[3] most endpoints a tenant may have
-- ARGV[4..] endpoint hash field, value pairs
-- Returns {0} registered | {20} the tenant has ARGV[3] endpoints already
--- @include "rcall"
local endpoint, filter = KEYS[1], KEYS[2]

if rcall('HLEN', filter) >= tonumber(ARGV[3]) then return {20} end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
rcall('HSET', endpoint, unpack(fields))
rcall('HSET', filter, ARGV[1], ARGV[2])
rcall('HSET', KEYS[3], 'wh', '1')
return {0}

-- webhook_register.lua: register a webhook endpoint: its description hash and its
-- entry in the tenant's filter hash (which create.lua and transition.lua read), at
-- once, unless the tenant already has the most endpoints allowed.
-- KEYS[1] endpoint hash          KEYS[2] webhook filter hash (endpoint id -> event letters)
-- KEYS[3] tenant meta hash: its "wh" field tells create.lua, in the read it makes
--         anyway, that the filter hash is worth reading
-- KEYS[4] credential admin-rate counter, KEYS[5] tenant rate counter (both optional:
--         present, the call is counted against ratelimit.admin and .tenant first)
-- ARGV[1] endpoint id            ARGV[2] event letters ("q" created, "p" processing, "sfce" terminal)
-- ARGV[3] most endpoints a tenant may have
-- ARGV[4] now (unix ms)
-- ARGV[5..] endpoint hash field, value pairs
-- Constants: RL_ADMIN_LIMIT, RL_ADMIN_WINDOW (ms, a string), RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- Returns a table whose first element is a string: the code, then, when
-- counted, rate_count's ":<limit>,<remaining>,<reset>;":
--   {"0"} registered | {"20", ARGV[3]} the tenant has ARGV[3] endpoints already
--   {"9"} rate limited: nothing written but the counters
--- @include "rcall"
--- @include "rate_gate"
local endpoint, filter = KEYS[1], KEYS[2]

local ok, rl = rate_gate(4, RL_ADMIN_LIMIT, RL_ADMIN_WINDOW, ARGV[4])
if not ok then return {'9' .. rl} end
if rcall('HLEN', filter) >= tonumber(ARGV[3]) then return {'20' .. rl, ARGV[3]} end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
rcall('HSET', endpoint, unpack(fields))
rcall('HSET', filter, ARGV[1], ARGV[2])
rcall('HSET', KEYS[3], 'wh', '1')
return {'0' .. rl}

-- webhook_delete.lua: remove a webhook endpoint, its filter entry and its delivery
-- log at once. Messages already in the outbox for it are dropped by the dispatcher
-- when it finds the endpoint gone.
-- KEYS[1] endpoint hash          KEYS[2] webhook filter hash
-- KEYS[3] delivery log list      KEYS[4] tenant meta hash ("wh" goes with the last endpoint)
-- KEYS[5] credential admin-rate counter, KEYS[6] tenant rate counter (both optional:
--         present, the call is counted against ratelimit.admin and .tenant first;
--         only the call on the tenant's shard 0 is counted)
-- ARGV[1] endpoint id            ARGV[2] now (unix ms)
-- Constants: RL_ADMIN_LIMIT, RL_ADMIN_WINDOW (ms, a string), RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- Returns a table whose first element is a string: the code, then, when
-- counted, rate_count's ":<limit>,<remaining>,<reset>;":
--   {"0", endpoints left} removed | {"1"} not found
--   {"9"} rate limited: nothing removed
--- @include "rcall"
--- @include "rate_gate"
local endpoint, filter, log = KEYS[1], KEYS[2], KEYS[3]

local ok, rl = rate_gate(5, RL_ADMIN_LIMIT, RL_ADMIN_WINDOW, ARGV[2])
if not ok then return {'9' .. rl} end
local had = rcall('HDEL', filter, ARGV[1]) + rcall('DEL', endpoint)
if had == 0 then return {'1' .. rl} end
rcall('DEL', log)
local left = rcall('HLEN', filter)
if left == 0 then rcall('HDEL', KEYS[4], 'wh') end
return {'0' .. rl, left}

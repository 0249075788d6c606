-- webhook_delete.lua: remove a webhook endpoint, its filter entry and its delivery
-- log at once. Messages already in the outbox for it are dropped by the dispatcher
-- when it finds the endpoint gone.
-- KEYS[1] endpoint hash          KEYS[2] webhook filter hash
-- KEYS[3] delivery log list      KEYS[4] tenant meta hash ("wh" goes with the last endpoint)
-- ARGV[1] endpoint id
-- Returns {0, endpoints left} removed | {1} not found
--- @include "rcall"
local endpoint, filter, log = KEYS[1], KEYS[2], KEYS[3]

local had = rcall('HDEL', filter, ARGV[1]) + rcall('DEL', endpoint)
if had == 0 then return {1} end
rcall('DEL', log)
local left = rcall('HLEN', filter)
if left == 0 then rcall('HDEL', KEYS[4], 'wh') end
return {0, left}

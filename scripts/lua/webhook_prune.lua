-- webhook_prune.lua: remove the outbox (and its consumer group) of a tenant that has
-- no webhook endpoint and nothing queued or waiting for a retry, so that its entry
-- in the webhook tenant registry can go. Atomic with the scripts that add endpoints
-- and messages: a registration after it simply starts a new outbox.
-- KEYS[1] webhook filter hash    KEYS[2] outbox stream
-- KEYS[3] retry zset
-- Returns {0} pruned | {7} still in use: nothing to do
--- @include "rcall"
local filter, outbox, retries = KEYS[1], KEYS[2], KEYS[3]

if rcall('HLEN', filter) > 0 or rcall('XLEN', outbox) > 0 or rcall('ZCARD', retries) > 0 then
  return {7}
end
rcall('DEL', outbox)
return {0}

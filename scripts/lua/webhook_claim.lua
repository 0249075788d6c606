-- webhook_claim.lua: claim the retries that are due, for one replica at a time: each
-- claimed member's score becomes the claimer's lease (when another replica may take
-- it over if this one died mid-delivery). webhook_settle.lua checks the lease.
-- KEYS[1] retry zset ("<outbox entry id>|<attempts made>", score = due unix ms)
-- ARGV[1] now (unix ms)          ARGV[2] lease until (unix ms)
-- ARGV[3] most members to claim
-- Returns {0, member, ...} the members claimed, each now scored ARGV[2]
--- @include "rcall"
local retries = KEYS[1]

local due = rcall('ZRANGEBYSCORE', retries, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {0}
for i = 1, #due do
  rcall('ZADD', retries, ARGV[2], due[i])
  out[#out + 1] = due[i]
end
return out

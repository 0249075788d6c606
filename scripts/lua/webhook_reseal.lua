-- webhook_reseal.lua: replace an endpoint's sealed secret with the same secret
-- sealed under the current webhooks.secret_key, if the endpoint still holds the
-- sealed form it was read with. An endpoint deleted meanwhile stays deleted: a
-- plain HSET would bring back a hash holding only the secret.
-- KEYS[1] endpoint hash
-- ARGV[1] sealed secret read      ARGV[2] the same secret sealed again
-- Returns {0} replaced | {1} the endpoint is gone or holds another secret
--- @include "rcall"
if rcall('HGET', KEYS[1], 'k') ~= ARGV[1] then return {1} end
rcall('HSET', KEYS[1], 'k', ARGV[2])
return {0}

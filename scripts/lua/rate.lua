-- rate.lua: count one call against its rate limits, for the calls whose own
-- work is plain reads (webhook listings and reads): the store sends it in
-- the same pipeline as those reads, so counting costs no round trip of its
-- own and cannot fail apart from the read.
-- KEYS[1] credential rate counter   KEYS[2] tenant rate counter
-- ARGV[1] now (unix ms)
-- Constants: RL_ADMIN_LIMIT, RL_ADMIN_WINDOW (ms, a string), RL_TENANT_LIMIT,
-- RL_TENANT_WINDOW: the admin scope is the only one counted here.
-- Returns one string: "0" allowed | "9" rate limited, each followed by
-- rate_count's ":<limit>,<remaining>,<reset>;".
--- @include "rate_gate"
local ok, rl = rate_gate(1, RL_ADMIN_LIMIT, RL_ADMIN_WINDOW, ARGV[1])
if not ok then return '9' .. rl end
return '0' .. rl

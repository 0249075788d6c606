-- lookup.lua: the records of a lookup by ids (GET /v1/requests?ids=...,
-- docs/reference.md §16) that one server holds, in one call per server: a
-- call names the records of the ids in the shards that server holds (one
-- server holds every shard; on a Cluster, the shards of one master:
-- Store.shardGroups), as list.lua names its indexes. Only KEYS[1] and the
-- rate counters are declared (Redis routes the call by them); the other keys
-- are of slots of the same node (list.lua says why that is allowed).
-- KEYS[1] meta hash of the call's first shard
-- KEYS[2] credential read-rate counter, KEYS[3] tenant rate counter: both
--         optional, given to the call holding the tenant's shard 0, which
--         counts the whole lookup, one read per id asked (ARGV[2])
-- ARGV[1] now (unix ms)        ARGV[2] reads to count: the ids asked
-- ARGV[3] m, the number of meta hashes that follow: ARGV[4 .. 3 + m], one
--         per shard of the call (a frozen tenant answers {2})
-- ARGV[4 + m ..] the record keys to read
-- Constants: RL_READ_LIMIT, RL_READ_WINDOW, RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- Returns {code, record or nil, ...}: code "0" and, when counted, rate_count's
-- ":<limit>,<remaining>,<reset>;", then one element per record key, in
-- ARGV's order | {2} tenant frozen | {"9" .. rate part} rate limited
--- @include "rcall"
--- @include "rate_gate"
local m = tonumber(ARGV[3])
for i = 4, 3 + m do
  if rcall('HGET', ARGV[i], 'fz') == '1' then return {2} end
end
local ok, rl = rate_gate(2, RL_READ_LIMIT, RL_READ_WINDOW, ARGV[1], tonumber(ARGV[2]))
if not ok then return {'9' .. rl} end
local out = {'0' .. rl}
for i = 4 + m, #ARGV do
  out[#out + 1] = rcall('GET', ARGV[i])
end
return out

-- delete.lua: remove a request, its history (kept in the record), its pacing state
-- and its index entries. A retention bucket may still list it: the sweeper skips
-- entries whose record is gone (sweep.lua).
-- KEYS[1] record   KEYS[2] deadline zset   KEYS[3] pacing hash
-- KEYS[4] audit stream   KEYS[5] tenant meta hash (audit_add counts a full stream there)
-- KEYS[6] change channel (the record's hash tag): the deletion announces
--         "<id>,<version>" there, so that waiters and streams learn it is gone
-- ARGV[1] id   ARGV[2] now (unix ms)   ARGV[4] by (key id, for the audit entry)
-- ARGV[3] index key prefix ("<prefix>:{<tenant>}:ix:"): the request's index,
--         "<prefix><status letter>:<type>", is named from its record (same slot)
-- ARGV[5] index-head summary prefix (keys.indexHeads; same slot): the type's
--         member of the status's summary goes when its index empties
-- KEYS[7] credential admin-rate counter, KEYS[8] tenant rate counter (both optional:
--         present, the call is counted against ratelimit.admin and .tenant first)
-- Constants: PUBLISH ('SPUBLISH' on a Cluster, else 'PUBLISH'), RL_ADMIN_LIMIT,
-- RL_ADMIN_WINDOW (ms, a string), RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- Returns one string (see poll.lua): "0" deleted | "1" not found
--   "9" rate limited: nothing removed
-- When counted, the code is followed by rate_count's ":<limit>,<remaining>,<reset>;".
--- @include "rcall"
--- @include "rate_gate"
--- @include "rec_split"
--- @include "rec_head"
--- @include "gone"
--- @include "audit_add"
--- @include "audit_seq"
--- @include "label_move"
local record, id = KEYS[1], ARGV[1]
local ok, rl = rate_gate(7, RL_ADMIN_LIMIT, RL_ADMIN_WINDOW, ARGV[2])
if not ok then return '9' .. rl end
local rec = rcall('GET', record)
if not rec then return '1' .. rl end
local st, typ, ex = rec_head(rec)
if gone(ex, ARGV[2]) then return '1' .. rl end
rcall('DEL', record, KEYS[3])
rcall('ZREM', ARGV[3] .. st .. ':' .. typ, id)
if rcall('EXISTS', ARGV[3] .. st .. ':' .. typ) == 0 then rcall('ZREM', ARGV[5] .. st, typ) end
rcall('ZREM', KEYS[2], id)
label_move(ARGV[3] .. 'l:', rec_split(rec)[F_LABELS], st, nil, id)
-- the audit entry of a delete: version and seq one past the record's last
if AUDIT_BOUND > 0 then
  local f = rec_split(rec)
  audit_add(KEYS[4], KEYS[5], id, tostring(tonumber(f[F_VERSION]) + 1), tostring(tonumber(audit_seq(f[F_EVENTS])) + 1), st, '', ARGV[4], ARGV[2], typ, '')
end
rcall(PUBLISH, KEYS[6], id .. ',' .. string.match(rec, '^.\31([^\31]*)'))
return '0' .. rl

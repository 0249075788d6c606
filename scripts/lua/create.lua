-- create.lua: register a new request (its record, whose first event is implied), its index
-- entries, and the Idempotency-Key, all in one atomic step.
-- KEYS[1] record                 KEYS[2] tenant meta hash: fields fz (frozen),
--         wh (has webhook endpoints), t:<type> for each type the tenant has made,
--         all read with one HMGET
-- KEYS[3] index (queued, its type): its score, created_at, is also what the
--         sweeper times the queued timeout from, so a queued request has no
--         deadline entry (that zset holds processing requests only)
-- KEYS[4] webhook filter hash (endpoint id -> event letters)
-- KEYS[5] webhook outbox stream  KEYS[6] audit stream
-- KEYS[7] credential write-rate counter, KEYS[8] tenant rate counter (both optional:
--         present, the call is counted against ratelimit.write and .tenant first)
-- KEYS[9], or KEYS[7] without the counters: idempotency key (optional)
-- ARGV[1] id                     ARGV[2] now = created_at (unix ms, the id's own)
-- ARGV[3] the record (built by newRecord, record.go)
-- ARGV[4] idempotency fingerprint (body digest)
-- ARGV[5] stale id: an idempotency entry naming this id may be replaced (its record is gone)
-- ARGV[6] type                   ARGV[7] created_by (for the audit entry)
-- ARGV[8] index-head summary prefix (keys.indexHeads; same hash tag, so this
--         slot): the type's score in the queued summary is raised to created_at
-- ARGV[9] label index prefix (keys.labelIndexPrefix; same slot), ARGV[10] the
--         labels ("name=value" pairs joined by ",", "" for none): one queued
--         label index entry per label (label_move)
-- While the shard is watched (meta field cw, read with the same HMGET), the
-- create is logged and announced for watches (changelog_add).
-- Constants (store.New, through luaConstants in scripts.go): IDEMPOTENCY_TTL (ms), OUTBOX_BOUND (XADD MAXLEN ~),
-- AUDIT_BOUND (the audit entry: audit_add), RL_WRITE_LIMIT, RL_WRITE_WINDOW (ms, a
-- string), RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- A created request emits request.created to the endpoints that asked for it (emit_webhooks).
-- Returns one string (see poll.lua): "0" created | "2" tenant frozen
--   "4" idempotency key reused with another body | "5" .. id replay: the key already made request id
--   "9" rate limited: nothing written but the counters
-- When counted, every code but 2 is followed by rate_count's ":<limit>,<remaining>,<reset>;".
--- @include "rcall"
--- @include "rate_gate"
--- @include "emit_webhooks"
--- @include "audit_add"
--- @include "label_move"
--- @include "changelog_add"
local record, meta, qset, hooks, outbox, idem =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7]
local id, now, rec = ARGV[1], ARGV[2], ARGV[3]

local m = rcall('HMGET', meta, 'fz', 'wh', 't:' .. ARGV[6], 'cw')
if m[1] == '1' then return '2' end

-- the write limits, before anything is written
local ok, rl = rate_gate(7, RL_WRITE_LIMIT, RL_WRITE_WINDOW, now)
if not ok then return '9' .. rl end
if KEYS[8] then idem = KEYS[9] end

-- The key is claimed and read in one call (SET NX GET: Redis 7.0+); if it was
-- taken, nothing was written. Claiming before the record is safe: a record that
-- then fails to appear leaves an entry naming a missing request, which the next
-- try takes over (ARGV[5]).
if idem then
  local prev = rcall('SET', idem, ARGV[4] .. '|' .. id, 'NX', 'PX', IDEMPOTENCY_TTL, 'GET')
  if prev then
    local sep = string.find(prev, '|', 1, true)
    local fp, pid = string.sub(prev, 1, sep - 1), string.sub(prev, sep + 1)
    if fp ~= ARGV[4] then return '4' .. rl end
    if pid ~= ARGV[5] then return '5' .. rl .. pid end
    rcall('SET', idem, ARGV[4] .. '|' .. id, 'PX', IDEMPOTENCY_TTL)
  end
end

if not rcall('SET', record, rec, 'NX') then return redis.error_reply('ERR id collision') end
rcall('ZADD', qset, now, id)
rcall('ZADD', ARGV[8] .. S_QUEUED, 'GT', now, ARGV[6])
label_move(ARGV[9], ARGV[10], nil, S_QUEUED, id, now)
if not m[3] then rcall('HSET', meta, 't:' .. ARGV[6], '1') end
if m[2] then emit_webhooks(hooks, outbox, OUTBOX_BOUND, S_QUEUED, id, now, rec) end
if AUDIT_BOUND > 0 then audit_add(KEYS[6], meta, id, '1', '1', '', S_QUEUED, ARGV[7], now, ARGV[6], '') end
if m[4] then changelog_add(meta, true, m[4], id, '1', now, rec) end
return '0' .. rl

-- transition.lua: one compare-and-set step of a request's lifecycle: processing
-- (start or heartbeat), complete, fail, cancel, and the sweeper's timeouts. It checks
-- the stored status, writes the new record (its event included), every index entry
-- and the Idempotency-Key at once; a terminal record is never written again.
-- KEYS[1] record           KEYS[2] deadline zset
-- KEYS[3] retention bucket index (zset of bucket ends)
-- KEYS[4] pacing hash      KEYS[5] tenant meta hash (its wh field: has webhook endpoints)
-- KEYS[6] webhook filter hash (endpoint id -> event letters)
-- KEYS[7] webhook outbox stream                    KEYS[8] audit stream
-- KEYS[9] change channel (the record's hash tag): an applied call announces
--         "<id>,<version>" on it for the waiters (internal/store/hub.go)
-- KEYS[10] credential write-rate counter, KEYS[11] tenant rate counter (both
--          optional: present, the call is counted against ratelimit.write and
--          .tenant first; the sweeper's calls are not counted)
-- KEYS[12], or KEYS[10] without the counters: idempotency key (optional)
-- ARGV[1] target status: p s f c e        ARGV[2] now (unix ms)
-- ARGV[3] by (key id, or "system")
-- ARGV[4] payload: progress / result / failure JSON, cancel reason JSON, or ""
-- ARGV[5] result type or ""
-- ARGV[6] guard: "" for callers; "q" or "p" for the sweeper: act only while the
--         request is still in that status and its timeout has passed: for "q",
--         created_at (ARGV[9]) + the type's queued timeout; for "p", its entry in
--         the deadline zset, which holds processing requests only
-- ARGV[7] idempotency fingerprint         ARGV[8] request id
-- ARGV[9] created_at (unix ms, the id's)
-- ARGV[10] retention bucket key prefix ("<prefix>:{<tenant>}:rb:"): a terminal
--          record that will expire is listed as "<status letter><id><type>" in the bucket
--          "<prefix><end ms>" (a list under the tenant's hash tag, so in this slot;
--          its name depends on expires_at, known only here) and the bucket's end
--          in KEYS[3]; the sweeper empties buckets once they end (sweep.lua).
-- ARGV[11] index key prefix ("<prefix>:{<tenant>}:ix:"): the request's index is
--          "<prefix><status letter>:<type>", named here because only the record
--          knows the type (same hash tag, so this slot).
-- ARGV[12] index-head summary prefix (keys.indexHeads; same slot): the type's
--          score in the new status's summary is raised to created_at (the old
--          status's is left high: one command per move, not two; sweep.lua drops
--          it once the type's requests are gone)
-- Every applied call is logged for watches while the shard is watched (meta
-- field cw; changelog_add).
-- The configuration comes as constants (store.New, through luaConstants in scripts.go):
-- QUEUED_TIMEOUT, PROCESSING_TIMEOUT, RETENTION (ms, 0 = forever), each with its
-- per-type ";t=ms;" string (..._BY_TYPE), IDEMPOTENCY_TTL (ms), OUTBOX_BOUND
-- (XADD MAXLEN ~), BUCKET_WIDTH (ms, the retention buckets'), AUDIT_BOUND
-- (entries the audit stream may hold; 0: audit off), PUBLISH ('SPUBLISH' on a
-- Cluster, else 'PUBLISH'), RL_WRITE_LIMIT, RL_WRITE_WINDOW (ms, a string),
-- RL_TENANT_LIMIT and RL_TENANT_WINDOW.
-- An applied status change emits its webhook event (emit_webhooks, when the tenant
-- has endpoints: meta field wh): queued ->
-- processing emits p (request.processing), a terminal status its own letter. A
-- heartbeat (processing -> processing) emits nothing.
-- Returns one string, the code digit then (for 0, 5, 6) the record (a string,
-- not a table: see poll.lua):
--   "0" .. record  applied | "1" not found
--   "4" idempotency key reused with another body
--   "5" .. record  idempotent replay
--   "6" .. record  already terminal (record untouched)
--   "7" sweeper guard failed: nothing to do
--   "9" rate limited: nothing written but the counters
-- When counted, the code is followed by rate_count's ":<limit>,<remaining>,<reset>;"
-- (before the record).
--- @include "rcall"
--- @include "fmt_ms"
--- @include "rate_gate"
--- @include "per_type"
--- @include "rec_split"
--- @include "rec_join"
--- @include "gone"
--- @include "terminal"
--- @include "emit_webhooks"
--- @include "audit_add"
--- @include "audit_seq"
--- @include "failure_code"
--- @include "label_move"
--- @include "bucket_entry"
--- @include "changelog_add"
local record, deadlines, buckets, pacing, meta, hooks, outbox, idem =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[10]
local to, now, by, payload, guard, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6], ARGV[8]

-- the write limits, before anything is read or written
local ok, rl = rate_gate(10, RL_WRITE_LIMIT, RL_WRITE_WINDOW, now)
if not ok then return '9' .. rl end
if KEYS[11] then idem = KEYS[12] end

local rec = rcall('GET', record)
if not rec then return '1' .. rl end
local f = rec_split(rec)
if gone(f[F_EXPIRES], now) then return '1' .. rl end

if idem then
  local prev = rcall('GET', idem)
  if prev then
    if prev ~= ARGV[7] then return '4' .. rl end
    return '5' .. rl .. rec
  end
end

local from = f[F_STATUS]
if terminal(from) then
  if guard ~= '' then return '7' end
  return '6' .. rl .. rec
end
if guard ~= '' then
  if from ~= guard then return '7' end
  if guard == S_QUEUED then
    local qt = tonumber(per_type(QUEUED_TIMEOUT_BY_TYPE, f[F_TYPE], QUEUED_TIMEOUT))
    if tonumber(ARGV[9]) + qt > tonumber(now) then return '7' end
  else
    local due = rcall('ZSCORE', deadlines, id)
    if not due or tonumber(due) > tonumber(now) then return '7' end
  end
end

local ca = ARGV[9]
local d = fmt_ms(tonumber(now) - tonumber(ca))
f[F_UPDATED] = d
if from ~= to then
  local ix = ARGV[11]
  rcall('ZREM', ix .. from .. ':' .. f[F_TYPE], id)
  rcall('ZADD', ix .. to .. ':' .. f[F_TYPE], ca, id)
  rcall('ZADD', ARGV[12] .. to, 'GT', ca, f[F_TYPE])
  label_move(ix .. 'l:', f[F_LABELS], from, to, id, ca)
  f[F_STATUS] = to
  local ev = to .. d
  if by ~= f[F_CREATED_BY] then ev = ev .. '@' .. by end
  if f[F_EVENTS] == '' then f[F_EVENTS] = ev else f[F_EVENTS] = f[F_EVENTS] .. ',' .. ev end
end
f[F_VERSION] = tostring(tonumber(f[F_VERSION]) + 1)

if to == S_PROCESSING then
  if payload ~= '' then f[F_PROGRESS] = payload end
  local timeout = tonumber(per_type(PROCESSING_TIMEOUT_BY_TYPE, f[F_TYPE], PROCESSING_TIMEOUT))
  rcall('ZADD', deadlines, fmt_ms(tonumber(now) + timeout), id)
  rec = rec_join(f)
  rcall('SET', record, rec)
else
  if to == S_SUCCEEDED then
    f[F_RESULT_TYPE], f[F_RESULT] = ARGV[5], payload
  elseif to == S_FAILED or to == S_EXPIRED then
    f[F_FAILURE] = payload
  else
    f[F_CANCELLATION] = payload
  end
  f[F_COMPLETED] = d
  -- only processing requests have a deadline entry (the sweeper drops a stray
  -- queued one once due)
  if from == S_PROCESSING then rcall('ZREM', deadlines, id) end
  -- pacing state ends with the request's active life
  rcall('DEL', pacing)
  local keep = tonumber(per_type(RETENTION_BY_TYPE, f[F_TYPE], RETENTION))
  if keep > 0 then
    local ex = tonumber(now) + keep
    f[F_EXPIRES] = fmt_ms(ex)
    rec = rec_join(f)
    rcall('SET', record, rec, 'PXAT', f[F_EXPIRES])
    local w = BUCKET_WIDTH
    local bend = fmt_ms((math.floor(ex / w) + 1) * w)
    if rcall('RPUSH', ARGV[10] .. bend, bucket_entry(to, id, f[F_TYPE], f[F_LABELS])) == 1 then
      rcall('ZADD', buckets, bend, bend)
    end
  else
    rec = rec_join(f)
    rcall('SET', record, rec)
  end
end

if idem then rcall('SET', idem, ARGV[7], 'PX', IDEMPOTENCY_TTL) end
-- every applied call, heartbeats included, is an audit entry (AUDIT_BOUND: lib.lua)
if AUDIT_BOUND > 0 then audit_add(KEYS[8], meta, id, f[F_VERSION], audit_seq(f[F_EVENTS]), from, to, by, now, f[F_TYPE], failure_code(to, payload)) end
-- the meta hash is small and read by every create and poll: asking it whether
-- there are endpoints at all is cheaper than reading an absent filter hash;
-- the same read tells whether the shard is watched (cw)
local mw = rcall('HMGET', meta, 'wh', 'cw')
if mw[2] then changelog_add(meta, false, mw[2], id, f[F_VERSION], now, rec) end
-- every applied call changes the version (a heartbeat too): wake the waiters
-- (and the watches, whose log entry is written by now)
rcall(PUBLISH, KEYS[9], id .. ',' .. f[F_VERSION])
if from ~= to and mw[1] then
  emit_webhooks(hooks, outbox, OUTBOX_BOUND, to, id, now, rec)
end
return '0' .. rl .. rec

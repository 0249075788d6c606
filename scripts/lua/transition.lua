-- transition.lua: one compare-and-set step of a request's lifecycle: processing
-- (start or heartbeat), complete, fail, cancel, and the sweeper's timeouts. It checks
-- the stored status, writes the new state, the event, every index entry and the
-- Idempotency-Key at once; a terminal record is never written again.
-- KEYS[1] record hash      KEYS[2] queued set     KEYS[3] processing set
-- KEYS[4] target status set (the processing set for "p")
-- KEYS[5] deadline zset    KEYS[6] retention zset
-- KEYS[7] webhook filter hash (endpoint id -> event letters)
-- KEYS[8] webhook outbox stream                   KEYS[9] idempotency key (optional)
-- ARGV[1] target status: p s f c e        ARGV[2] now (unix ms)
-- ARGV[3] by (key id, or "system")
-- ARGV[4] payload: progress / result / failure JSON, cancel reason JSON, or ""
-- ARGV[5] result type or ""
-- ARGV[6] guard: "" for callers; "q" or "p" for the sweeper: act only while the
--         request is still in that status and its deadline has passed
-- ARGV[7] processing timeout (ms)          ARGV[8] per-type processing timeouts ";t=ms;"
-- ARGV[9] retention (ms, 0 = forever)     ARGV[10] per-type retention ";t=ms;"
-- ARGV[11] idempotency fingerprint        ARGV[12] idempotency ttl (ms)
-- ARGV[13] request id                    ARGV[14] outbox bound (XADD MAXLEN ~)
-- An applied status change emits its webhook event (emit_webhooks): queued ->
-- processing emits p (request.processing), a terminal status its own letter. A
-- heartbeat (processing -> processing) emits nothing.
-- Returns {0, field, value, ...} applied        | {1} not found
--         {4} idempotency key reused with another body
--         {5, field, value, ...} idempotent replay
--         {6, field, value, ...} already terminal (record untouched)
--         {7} sweeper guard failed: nothing to do
local record, qset, pset, target, deadlines, retention, hooks, outbox, idem =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local to, now, by, payload, guard, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6], ARGV[13]

local flat = rcall('HGETALL', record)
if #flat == 0 or gone(flat, now) then return {1} end

if idem then
  local prev = rcall('GET', idem)
  if prev then
    if prev ~= ARGV[11] then return {4} end
    return record_reply({5}, flat)
  end
end

local from = field(flat, 's')
if terminal(from) then
  if guard ~= '' then return {7} end
  return record_reply({6}, flat)
end
if guard ~= '' then
  local due = rcall('ZSCORE', deadlines, id)
  if from ~= guard or not due or tonumber(due) > tonumber(now) then return {7} end
end

local typ = field(flat, 't')
local set = {'ua', now}
if from ~= to then
  rcall('ZREM', from == 'q' and qset or pset, id)
  rcall('ZADD', target, field(flat, 'ca'), id)
  set[#set + 1] = 's'
  set[#set + 1] = to
  set[#set + 1] = 'e'
  set[#set + 1] = field(flat, 'e') .. ';' .. now .. ',' .. from .. ',' .. to .. ',' .. by
end

if to == 'p' then
  if payload ~= '' then
    set[#set + 1] = 'g'
    set[#set + 1] = payload
  end
  local timeout = tonumber(per_type(ARGV[8], typ, ARGV[7]))
  rcall('ZADD', deadlines, fmt_ms(tonumber(now) + timeout), id)
else
  if to == 's' then
    set[#set + 1] = 'rt'
    set[#set + 1] = ARGV[5]
    set[#set + 1] = 'r'
    set[#set + 1] = payload
  elseif to == 'f' or to == 'e' then
    set[#set + 1] = 'f'
    set[#set + 1] = payload
  elseif payload ~= '' then
    set[#set + 1] = 'x'
    set[#set + 1] = payload
  end
  set[#set + 1] = 'co'
  set[#set + 1] = now
  rcall('ZREM', deadlines, id)
  -- pacing state ends with the request's active life
  local pacing = {}
  for i = 1, #flat, 2 do
    if string.byte(flat[i], 1) == 126 then pacing[#pacing + 1] = flat[i] end
  end
  if #pacing > 0 then rcall('HDEL', record, unpack(pacing)) end
  local keep = tonumber(per_type(ARGV[10], typ, ARGV[9]))
  if keep > 0 then
    local ex = fmt_ms(tonumber(now) + keep)
    set[#set + 1] = 'ex'
    set[#set + 1] = ex
    rcall('ZADD', retention, ex, id .. ' ' .. typ)
    rcall('PEXPIREAT', record, ex)
  end
end

set[#set + 1] = 'v'
set[#set + 1] = tostring(tonumber(field(flat, 'v')) + 1)
rcall('HSET', record, unpack(set))
if idem then rcall('SET', idem, ARGV[11], 'PX', ARGV[12]) end
local after = rcall('HGETALL', record)
if from ~= to then emit_webhooks(hooks, outbox, ARGV[14], to, id, now, after) end
return record_reply({0}, after)

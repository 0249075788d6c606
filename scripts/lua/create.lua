-- create.lua: register a new request, its first event and its index entries, and
-- record the Idempotency-Key, all in one atomic step.
-- KEYS[1] record hash            KEYS[2] tenant meta hash
-- KEYS[3] status set (queued)    KEYS[4] type set
-- KEYS[5] deadline zset          KEYS[6] webhook filter hash (endpoint id -> event letters)
-- KEYS[7] webhook outbox stream  KEYS[8] idempotency key (optional)
-- ARGV[1] id                     ARGV[2] now (unix ms)
-- ARGV[3] type                   ARGV[4] context JSON or ""
-- ARGV[5] created_by (key id)    ARGV[6] queued deadline (unix ms)
-- ARGV[7] idempotency fingerprint (body digest)   ARGV[8] idempotency ttl (ms)
-- ARGV[9] stale id: an idempotency entry naming this id may be replaced (its record is gone)
-- ARGV[10] outbox bound (XADD MAXLEN ~)
-- A created request emits request.created to the endpoints that asked for it (emit_webhooks).
-- Returns {0} created | {2} tenant frozen | {4} idempotency key reused with another body
--         {5, id} replay: the key already made request id
local record, meta, qset, tset, deadlines, hooks, outbox, idem =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local id, now = ARGV[1], ARGV[2]

if rcall('HGET', meta, 'fz') == '1' then return {2} end

if idem then
  local prev = rcall('GET', idem)
  if prev then
    local sep = string.find(prev, '|', 1, true)
    local fp, pid = string.sub(prev, 1, sep - 1), string.sub(prev, sep + 1)
    if fp ~= ARGV[7] then return {4} end
    if pid ~= ARGV[9] then return {5, pid} end
  end
end

if rcall('EXISTS', record) == 1 then return redis.error_reply('ERR id collision') end

local fields = {'s', 'q', 'v', '1', 't', ARGV[3], 'b', ARGV[5], 'ca', now, 'ua', now,
  'e', now .. ',,q,' .. ARGV[5]}
if ARGV[4] ~= '' then
  fields[#fields + 1] = 'c'
  fields[#fields + 1] = ARGV[4]
end
rcall('HSET', record, unpack(fields))
rcall('ZADD', qset, now, id)
rcall('ZADD', tset, now, id)
rcall('ZADD', deadlines, ARGV[6], id)
if idem then
  rcall('SET', idem, ARGV[7] .. '|' .. id, 'PX', ARGV[8])
end
emit_webhooks(hooks, outbox, ARGV[10], 'q', id, now, fields)
return {0}

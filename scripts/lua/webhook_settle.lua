-- webhook_settle.lua: record the outcome of one delivery attempt at once: done
-- (delivered, failed after the last step, or dropped because the endpoint is gone)
-- removes the message from the outbox; a failure with steps left schedules the
-- next attempt; the attempt goes to the endpoint's delivery log (newest first,
-- capped).
-- A first attempt (read from the consumer group) is acknowledged in the group. An
-- attempt claimed from the retry zset may only reschedule while this replica
-- still holds its lease: if the lease expired and another replica took the
-- message over, that replica decides (this attempt is still logged, and a
-- delivery still removes the message).
-- KEYS[1] outbox stream          KEYS[2] retry zset
-- KEYS[3] delivery log list
-- ARGV[1] consumer group         ARGV[2] outbox entry id
-- ARGV[3] retry member held, or "" for a first attempt
-- ARGV[4] lease held (unix ms), or ""
-- ARGV[5] next retry member, or "" when the message is done
-- ARGV[6] next attempt due (unix ms), or ""
-- ARGV[7] delivery log entry (JSON), or "" to log nothing
-- ARGV[8] delivery log cap
-- ARGV[9] "1" when the message is done whatever the lease (delivered, or its
--         endpoint is gone); "" when only the lease holder may end it (final failure)
-- Returns {0} settled | {10} lease lost: only logged (and removed when delivered)
--- @include "rcall"
local outbox, retries, log = KEYS[1], KEYS[2], KEYS[3]
local held, nextm = ARGV[3], ARGV[5]

local own = true
if held == '' then
  rcall('XACK', outbox, ARGV[1], ARGV[2])
else
  local sc = rcall('ZSCORE', retries, held)
  own = sc ~= false and sc ~= nil and tonumber(sc) == tonumber(ARGV[4])
end

if nextm == '' then
  if own or ARGV[9] == '1' then
    rcall('XDEL', outbox, ARGV[2])
    if held ~= '' then rcall('ZREM', retries, held) end
  end
elseif own then
  if held ~= '' then rcall('ZREM', retries, held) end
  rcall('ZADD', retries, ARGV[6], nextm)
end

if ARGV[7] ~= '' then
  rcall('LPUSH', log, ARGV[7])
  rcall('LTRIM', log, 0, tonumber(ARGV[8]) - 1)
end
if own then return {0} end
return {10}

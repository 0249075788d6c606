-- poll.lua: read one request and, for a caller, pace its polling and count its read
-- rate limits, all in one round trip (docs/reference.md §5). Pacing state lives in the
-- request's pacing hash, field <caller> = "n,at,ra"; the terminal transition and
-- delete remove that hash, so it never outlives the request's active life.
-- KEYS[1] record   KEYS[2] tenant meta hash   KEYS[3] pacing hash
-- KEYS[4] credential read-rate counter, KEYS[5] tenant rate counter (both
--         optional: present, the call is counted against ratelimit.read and .tenant)
-- ARGV[1] now (unix ms)
-- ARGV[2] caller ("" = read without pacing: events, internal reads)
-- Constants (store.New, through luaConstants in scripts.go): EARLY_TOLERANCE (e.g. 0.2), SCHEDULE
-- (seconds: "1,2,5,10,30"), SCHEDULE_BY_TYPE (";type=1,2,5;" or ""), RL_READ_LIMIT,
-- RL_READ_WINDOW (ms, a string), RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- The reply is one string, "<code>[:<rl_limit>,<rl_remaining>,<rl_reset_ms>;],<n>",
-- then for code 0 "|" and the record. A string because Redis turns a Lua table
-- into a reply much more slowly than a string, and go-redis allocates once per
-- element (docs/design.md, Scripts).
-- The rl_ part (rate_count's) is the binding rate limit after counting, absent
-- when nothing was counted. code and n:
--   0 ok: n = retry_after (0 when not paced: terminal), then "|" and the record
--   1 not found (or past retention) | 2 tenant frozen: n = 0
--   3 polled too early: n = seconds left (pacing state unchanged)
--   9 rate limited: n = 0 (nothing else counted or read)
--- @include "rcall"
--- @include "fmt_ms"
--- @include "rate_gate"
--- @include "per_type"
--- @include "rec_head"
--- @include "gone"
--- @include "terminal"
local record, meta, pacing = KEYS[1], KEYS[2], KEYS[3]
local now, caller = ARGV[1], ARGV[2]

if rcall('HGET', meta, 'fz') == '1' then return '2,0' end

-- The read limits: the credential first, then its tenant.
local ok, rl = rate_gate(4, RL_READ_LIMIT, RL_READ_WINDOW, now)
if not ok then return '9' .. rl .. ',0' end

local rec = rcall('GET', record)
if not rec then return '1' .. rl .. ',0' end
local st, typ, ex = rec_head(rec)
if gone(ex, now) then return '1' .. rl .. ',0' end

if caller == '' or terminal(st) then
  return '0' .. rl .. ',0|' .. rec
end

local state = rcall('HGET', pacing, caller)
local n = 1
if state then
  local a, b = string.find(state, ',', 1, true)
  local c = string.find(state, ',', b + 1, true)
  n = tonumber(string.sub(state, 1, a - 1)) + 1
  local at = tonumber(string.sub(state, b + 1, c - 1))
  local ra = tonumber(string.sub(state, c + 1))
  local t = tonumber(now)
  if t < at + ra * 1000 * (1 - EARLY_TOLERANCE) then
    local left = math.ceil((at + ra * 1000 - t) / 1000)
    if left < 1 then left = 1 end
    return '3' .. rl .. ',' .. fmt_ms(left)
  end
end

-- the n-th step of the schedule (the last one past its end)
local sched = SCHEDULE
if SCHEDULE_BY_TYPE ~= '' then sched = per_type(SCHEDULE_BY_TYPE, typ, sched) end
local ra, i = sched, 1
for _ = 1, n do
  local e = string.find(sched, ',', i, true)
  if not e then ra = string.sub(sched, i) break end
  ra, i = string.sub(sched, i, e - 1), e + 1
end
if n == 1 then n = '1' end -- a caller's first poll: no number to print (Lua prints numbers through sprintf)
rcall('HSET', pacing, caller, n .. ',' .. now .. ',' .. ra)
return '0' .. rl .. ',' .. ra .. '|' .. rec

-- poll.lua: read one request and, for a caller, pace its polling in the same round
-- trip (spec §5). Pacing state lives in the record itself as "~<caller>" = "n,at,ra",
-- so it never outlives the request and the terminal transition drops it.
-- KEYS[1] record hash   KEYS[2] tenant meta hash
-- ARGV[1] now (unix ms)
-- ARGV[2] caller ("" = read without pacing: events, internal reads)
-- ARGV[3] early tolerance, e.g. "0.2"
-- ARGV[4] default schedule, seconds: "1,2,5,10,30"
-- ARGV[5] per-type schedules ";type=1,2,5;" or ""
-- Returns {0, retry_after, field, value, ...}  (retry_after 0: not paced, terminal)
--         {1} not found (or past retention)  | {2} tenant frozen
--         {3, seconds_left} polled too early (state unchanged)
local record, meta = KEYS[1], KEYS[2]
local now, caller = ARGV[1], ARGV[2]

if rcall('HGET', meta, 'fz') == '1' then return {2} end
local flat = rcall('HGETALL', record)
if #flat == 0 or gone(flat, now) then return {1} end

if caller == '' or terminal(field(flat, 's')) then
  return record_reply({0, 0}, flat)
end

local pf = '~' .. caller
local n = 0
local state = field(flat, pf)
if state then
  local a, b = string.find(state, ',', 1, true)
  local c = string.find(state, ',', b + 1, true)
  n = tonumber(string.sub(state, 1, a - 1))
  local at = tonumber(string.sub(state, b + 1, c - 1))
  local ra = tonumber(string.sub(state, c + 1))
  local t = tonumber(now)
  if t < at + ra * 1000 * (1 - tonumber(ARGV[3])) then
    local left = math.ceil((at + ra * 1000 - t) / 1000)
    if left < 1 then left = 1 end
    return {3, left}
  end
end

n = n + 1
local steps = {}
for s in string.gmatch(per_type(ARGV[5], field(flat, 't'), ARGV[4]), '%d+') do
  steps[#steps + 1] = s
end
local ra = steps[math.min(n, #steps)]
rcall('HSET', record, pf, n .. ',' .. now .. ',' .. ra)
return record_reply({0, tonumber(ra)}, flat)

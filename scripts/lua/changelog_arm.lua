-- changelog_arm.lua: start (or keep) logging the changes of one tenant shard
-- for watches (docs/reference.md §16; internal/store/watch.go), and say where
-- its change log stands. A watch arms every shard of its tenant when it
-- starts, and the replica holding it again while it is held, so that the
-- create and transition scripts keep logging (their meta field cw) until a
-- client that left may still resume.
-- KEYS[1] tenant meta hash (fields cw: log until, unix ms; cm: the log may
--         have lost entries up to this id)
-- KEYS[2] change log stream
-- KEYS[3] credential read-rate counter, KEYS[4] tenant rate counter (both
--         optional: the watch is counted once, as one read, on shard 0)
-- ARGV[1] now (unix ms)   ARGV[2] log until (unix ms)
-- ARGV[3] the shard's part of the position a watch resumes from, or ""
-- Returns {code, top, lost}: code "0" (or "9", rate limited: nothing else is
-- done) followed by rate_count's ":<limit>,<remaining>,<reset>;" when counted;
-- top the id of the log's newest entry (where a new watch starts); lost "1"
-- when ARGV[3] is before cm (the log may have lost entries after it), else "0".
-- A shard whose log was off (cw absent or past) gets a gap entry ("g"), and cm
-- is moved to it: a position from before it cannot be resumed (changes were
-- not logged), one after it can.
--- @include "rcall"
--- @include "id_before"
--- @include "rate_gate"
local meta, log, now = KEYS[1], KEYS[2], ARGV[1]
local ok, rl = rate_gate(3, RL_READ_LIMIT, RL_READ_WINDOW, now)
if not ok then return {'9' .. rl} end
local m = rcall('HMGET', meta, 'cw', 'cm')
local mark = m[2]
if not m[1] or tonumber(m[1]) < tonumber(now) then
  mark = rcall('XADD', log, '*', 'g', '1')
  rcall('HSET', meta, 'cm', mark, 'cw', ARGV[2])
elseif tonumber(m[1]) < tonumber(ARGV[2]) then
  rcall('HSET', meta, 'cw', ARGV[2])
end
local lost = '0'
if ARGV[3] ~= '' and id_before(ARGV[3], mark) then lost = '1' end
local top = rcall('XREVRANGE', log, '+', '-', 'COUNT', 1)
if top[1] then return {'0' .. rl, top[1][1], lost} end
return {'0' .. rl, mark, lost}

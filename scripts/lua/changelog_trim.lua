-- changelog_trim.lua: bound one tenant shard's change log (docs/reference.md
-- §16; internal/store/watch.go) by time and by length, run by the sweeper.
-- Writes never trim (one XADD is all a logged change costs); this moves the
-- meta field cm to the newest id removed, so that a watch resuming from
-- before it is told to start over rather than miss changes.
-- KEYS[1] tenant meta hash (cw: logged until; cm: lost up to)
-- KEYS[2] change log stream
-- ARGV[1] the newest id older than the replay window ("<now - window - 1>-<max>")
-- ARGV[2] the oldest id kept ("<now - window>-0")   ARGV[3] most entries kept
-- Returns "0".
--- @include "rcall"
--- @include "id_before"
local meta, log = KEYS[1], KEYS[2]
if rcall('EXISTS', log) == 0 then return '0' end
local function pred(id)
  local ms, sq = string.match(id, '^(%d+)-(%d+)$')
  if tonumber(sq) > 0 then return ms .. '-' .. string.format('%.0f', tonumber(sq) - 1) end
  return string.format('%.0f', tonumber(ms) - 1) .. '-18446744073709551615'
end
local mark = nil
local old = rcall('XREVRANGE', log, ARGV[1], '-', 'COUNT', 1)
if old[1] then
  mark = old[1][1]
  rcall('XTRIM', log, 'MINID', ARGV[2])
end
if rcall('XLEN', log) > tonumber(ARGV[3]) then
  rcall('XTRIM', log, 'MAXLEN', ARGV[3])
  local first = rcall('XRANGE', log, '-', '+', 'COUNT', 1)
  if first[1] then mark = pred(first[1][1]) end
end
-- cm only moves forward (a gap entry may be newer than what was trimmed)
local cm = rcall('HGET', meta, 'cm')
if mark and (not cm or id_before(cm, mark)) then rcall('HSET', meta, 'cm', mark) end
return '0'

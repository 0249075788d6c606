-- changelog_read.lua: read one tenant shard's change log after a position,
-- for a watch (docs/reference.md §16; internal/store/watch.go). The check that
-- nothing after the position was trimmed and the read are one atomic step.
-- KEYS[1] tenant meta hash (field cm: the log may have lost entries up to
--         this id; changelog_arm.lua, changelog_trim.lua)
-- KEYS[2] change log stream
-- ARGV[1] the position: the id of the last entry the reader has
-- ARGV[2] the first id after it ("<ms>-<seq + 1>")   ARGV[3] most entries
-- Returns {"1", cm} when the position is before cm (or {"1"} when cm is
-- absent: the log was never armed): entries after it may be lost, the reader
-- starts over (every entry after cm is there); else
-- {"0", entries...}, each entry {id, {field, value, ...}} as XRANGE gives it.
--- @include "rcall"
--- @include "id_before"
local mark = rcall('HGET', KEYS[1], 'cm')
if not mark then return {'1'} end
if id_before(ARGV[1], mark) then return {'1', mark} end
local out = rcall('XRANGE', KEYS[2], ARGV[2], '+', 'COUNT', ARGV[3])
table.insert(out, 1, '0')
return out

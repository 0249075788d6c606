-- sweep.lua: empty (part of) one retention bucket whose end has passed: remove the
-- status index entry of each listed terminal record that is past its retention.
-- The record itself goes by its Redis TTL; one still present past its expires_at
-- (a lazy TTL, the embedded store's clock) is deleted here too. A record still
-- present and not past its expires_at had its retention changed (`retention
-- reapply` lists it in its new bucket) and is left alone. Entries are taken and
-- trimmed in this one step, so concurrent sweepers never handle one twice.
-- KEYS[1] bucket (list of "<status letter><id>")   KEYS[2] bucket index (zset)
-- KEYS[3..6] status sets s f c e
-- ARGV[1] now (unix ms)   ARGV[2] most entries to take
-- ARGV[3] record key prefix ("<prefix>:{<tenant>}:r:"): the records are keys of
--         this tenant's slot, named from the bucket's entries
-- ARGV[4] the bucket's end (its member in KEYS[2])
-- Returns {0, removed, left, taken}: index entries removed, entries left in the
-- bucket, entries taken from it
local bucket, now = KEYS[1], ARGV[1]
local sets = {s = KEYS[3], f = KEYS[4], c = KEYS[5], e = KEYS[6]}
local entries = rcall('LRANGE', bucket, 0, tonumber(ARGV[2]) - 1)
local removed = 0
for i = 1, #entries do
  local st, id = string.sub(entries[i], 1, 1), string.sub(entries[i], 2)
  local key = ARGV[3] .. id
  local head = rcall('GETRANGE', key, 0, 99)
  local keep = false
  if head ~= '' then
    local _, _, ex = rec_head(head)
    keep = not gone(ex, now)
    if not keep then rcall('DEL', key) end
  end
  if not keep and sets[st] then
    removed = removed + rcall('ZREM', sets[st], id)
  end
end
rcall('LTRIM', bucket, #entries, -1)
local left = rcall('LLEN', bucket)
if left == 0 then rcall('ZREM', KEYS[2], ARGV[4]) end
return {0, removed, left, #entries}

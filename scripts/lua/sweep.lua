-- sweep.lua: empty (part of) one retention bucket whose end has passed: remove the
-- (status, type) index entry of each listed terminal record that is past its retention.
-- The record itself goes by its Redis TTL; one still present past its expires_at
-- (a lazy TTL, the embedded store's clock) is deleted here too. A record still
-- present and not past its expires_at had its retention changed (`retention
-- reapply` lists it in its new bucket) and is left alone. Entries are taken and
-- trimmed in this one step, so concurrent sweepers never handle one twice.
-- KEYS[1] bucket (list of "<status letter><id><type>")   KEYS[2] bucket index (zset)
-- ARGV[1] now (unix ms)   ARGV[2] most entries to take
-- ARGV[3] record key prefix ("<prefix>:{<tenant>}:r:"): the records are keys of
--         this tenant's slot, named from the bucket's entries
-- ARGV[4] the bucket's end (its member in KEYS[2])
-- ARGV[5] index key prefix ("<prefix>:{<tenant>}:ix:"): an entry's index is
--         "<prefix><status letter>:<type>" (same slot)
-- ARGV[6] index-head summary prefix (keys.indexHeads; same slot): an index
--         emptied here leaves its status's summary (with the type's empty
--         queued and processing indexes)
-- Returns {0, removed, left, taken}: index entries removed, entries left in the
-- bucket, entries taken from it
--- @include "rcall"
--- @include "rec_head"
--- @include "gone"
--- @include "terminal"
--- @include "label_move"
local bucket, now = KEYS[1], ARGV[1]
local entries = rcall('LRANGE', bucket, 0, tonumber(ARGV[2]) - 1)
local removed = 0
for i = 1, #entries do
  local e = entries[i]
  local st, id, typ = string.sub(e, 1, 1), string.sub(e, 2, 37), string.sub(e, 38)
  local labels = ''
  local cut = string.find(typ, '\31', 1, true)
  if cut then
    -- two statements: miniredis's Lua assigns typ before it evaluates the
    -- second expression of "typ, labels = a, b"
    labels = string.sub(typ, cut + 1)
    typ = string.sub(typ, 1, cut - 1)
  end
  local key = ARGV[3] .. id
  local head = rcall('GETRANGE', key, 0, 99)
  local keep = false
  if head ~= '' then
    local _, _, ex = rec_head(head)
    keep = not gone(ex, now)
    if not keep then rcall('DEL', key) end
  end
  if not keep and terminal(st) and typ ~= '' then
    local ix = ARGV[5] .. st .. ':' .. typ
    label_move(ARGV[5] .. 'l:', labels, st, nil, id)
    if rcall('ZREM', ix, id) == 1 then
      removed = removed + 1
      if rcall('EXISTS', ix) == 0 then
        -- the type's last terminal request of this status went: its summary
        -- member goes, and so do the queued and processing ones that
        -- transitions leave behind, once those indexes are empty too
        rcall('ZREM', ARGV[6] .. st, typ)
        for _, a in ipairs(S_LIVE) do
          if rcall('EXISTS', ARGV[5] .. a .. ':' .. typ) == 0 then rcall('ZREM', ARGV[6] .. a, typ) end
        end
      end
    end
  end
end
rcall('LTRIM', bucket, #entries, -1)
local left = rcall('LLEN', bucket)
if left == 0 then rcall('ZREM', KEYS[2], ARGV[4]) end
return {0, removed, left, #entries}

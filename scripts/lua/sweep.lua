-- sweep.lua: remove the index entries of terminal records whose retention has run
-- out. The record itself goes by its Redis TTL; a record still present past its
-- expires_at (a lazy TTL, the embedded store's clock) is deleted here too.
-- KEYS[1] retention zset   KEYS[2..5] status sets s f c e
-- then for member i (1-based): KEYS[4 + 2i] record hash, KEYS[5 + 2i] type set
-- ARGV[1] now (unix ms)    ARGV[1 + i] member i: "<id> <type>"
-- Returns {0, removed}
local rx, now = KEYS[1], tonumber(ARGV[1])
local removed = 0
for i = 2, #ARGV do
  local member = ARGV[i]
  local score = rcall('ZSCORE', rx, member)
  if score and tonumber(score) <= now then
    local id = string.sub(member, 1, string.find(member, ' ', 1, true) - 1)
    local record, tset = KEYS[4 + 2 * (i - 1)], KEYS[5 + 2 * (i - 1)]
    rcall('DEL', record)
    for k = 2, 5 do rcall('ZREM', KEYS[k], id) end
    rcall('ZREM', tset, id)
    rcall('ZREM', rx, member)
    removed = removed + 1
  end
end
return {0, removed}

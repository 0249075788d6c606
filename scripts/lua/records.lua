-- records.lua: read the records of one list page in one round trip (the ids come
-- from list.lua; a record may have changed or vanished since), for the embedded
-- store only. On Redis, list.go uses a pipeline of HGETALLs, which costs a quarter
-- of this script's Redis CPU; but miniredis's in-memory connection deadlocks on a
-- pipeline larger than its 4 KiB read buffer, and one script call is one command.
-- KEYS[i] record hash of item i
-- ARGV[1] now (unix ms)
-- Returns {0, n1, field, value, ..., n2, field, value, ...}: for item i the number
-- of field/value entries that follow (0 when the record is gone or past its
-- retention), without pacing state ("~caller") and events ("e"), which listings
-- do not show.
local now = ARGV[1]
local out = {0}
for i = 1, #KEYS do
  local flat = rcall('HGETALL', KEYS[i])
  if #flat == 0 or gone(flat, now) then
    out[#out + 1] = 0
  else
    local at = #out + 1
    out[at] = 0
    local n = 0
    for j = 1, #flat, 2 do
      local f = flat[j]
      if string.byte(f, 1) ~= 126 and f ~= 'e' then
        out[#out + 1] = f
        out[#out + 1] = flat[j + 1]
        n = n + 2
      end
    end
    out[at] = n
  end
end
return out

-- reapply.lua: apply the current retention configuration to existing terminal
-- records (`asyncstatus retention reapply`). For each record: expires_at becomes
-- completed_at + retention(type) with the record's TTL and its retention index
-- entry; retention 0 keeps it forever (PERSIST, no expires_at, no entry); a record
-- whose new (or old) expires_at has passed is deleted now with its index entries.
-- Non-terminal and vanished records are left alone. A dry run only counts.
-- KEYS[1] retention zset   KEYS[2..5] status sets s f c e
-- then for record i (1-based): KEYS[4 + 2i] record hash, KEYS[5 + 2i] its type set
-- ARGV[1] now (unix ms)   ARGV[2] retention (ms, 0 = forever)
-- ARGV[3] per-type retention ";t=ms;"   ARGV[4] "1" for a dry run, else "0"
-- ARGV[4 + i] record i: "<id> <type>"
-- Returns {0, updated, deleted, unchanged, skipped}
local rx, now, dry = KEYS[1], tonumber(ARGV[1]), ARGV[4] == '1'
local updated, deleted, unchanged, skipped = 0, 0, 0, 0
for i = 5, #ARGV do
  local member = ARGV[i]
  local sep = string.find(member, ' ', 1, true)
  local id, typ = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
  local record, tset = KEYS[4 + 2 * (i - 4)], KEYS[5 + 2 * (i - 4)]
  local f = rcall('HMGET', record, 's', 't', 'co', 'ex')
  local st, rtyp, co, ex = f[1], f[2], f[3], f[4]
  if not st or rtyp ~= typ or not terminal(st) or not co then
    skipped = skipped + 1
  else
    local keep = tonumber(per_type(ARGV[3], typ, ARGV[2]))
    local newex = tonumber(co) + keep
    if (ex and tonumber(ex) <= now) or (keep > 0 and newex <= now) then
      -- already gone for every reader, or gone under the new configuration
      if not dry then
        rcall('DEL', record)
        for k = 2, 5 do rcall('ZREM', KEYS[k], id) end
        rcall('ZREM', tset, id)
        rcall('ZREM', rx, member)
      end
      deleted = deleted + 1
    elseif keep == 0 then
      if ex or rcall('PTTL', record) >= 0 then
        if not dry then
          rcall('PERSIST', record)
          rcall('HDEL', record, 'ex')
          rcall('ZREM', rx, member)
        end
        updated = updated + 1
      else
        unchanged = unchanged + 1
      end
    else
      local exs = fmt_ms(newex)
      if ex == exs and rcall('ZSCORE', rx, member) then
        unchanged = unchanged + 1
      else
        if not dry then
          rcall('HSET', record, 'ex', exs)
          rcall('PEXPIREAT', record, exs)
          rcall('ZADD', rx, exs, member)
        end
        updated = updated + 1
      end
    end
  end
end
return {0, updated, deleted, unchanged, skipped}

-- reapply.lua: apply the current retention configuration to existing terminal
-- records (`asyncstatus retention reapply`). For each record: expires_at becomes
-- completed_at + retention(type), with the record's TTL and a retention bucket entry
-- (as transition.lua makes them); retention 0 keeps it forever (PERSIST, no
-- expires_at). An entry left in an older bucket is harmless: the sweeper skips a
-- record that is present and not past its expires_at. A record whose new (or old)
-- expires_at has passed is deleted now with its index entry. Non-terminal and
-- vanished records are left alone. A dry run only counts.
-- KEYS[1] retention bucket index   KEYS[1 + i] record i
-- ARGV[1] now (unix ms)   ARGV[2] "1" for a dry run, else "0"
-- ARGV[3] retention bucket key prefix
-- ARGV[4] index key prefix (a record's index is "<prefix><status letter>:<type>")
-- ARGV[3 + 2i] record i's id   ARGV[4 + 2i] its created_at (unix ms), i = 1, 2, ...
-- Constants (store.New, through luaConstants in scripts.go): RETENTION (ms, 0 =
-- forever), RETENTION_BY_TYPE (";t=ms;"), BUCKET_WIDTH (ms): the configuration
-- of the process that runs the command.
-- Returns {0, updated, deleted, unchanged, skipped}
--- @include "rcall"
--- @include "fmt_ms"
--- @include "per_type"
--- @include "rec_split"
--- @include "rec_join"
--- @include "gone"
--- @include "terminal"
--- @include "label_move"
--- @include "bucket_entry"
local buckets, now, dry = KEYS[1], tonumber(ARGV[1]), ARGV[2] == '1'
local w = BUCKET_WIDTH
local updated, deleted, unchanged, skipped = 0, 0, 0, 0
local i = 1
while ARGV[3 + 2 * i] do
  local id, ca = ARGV[3 + 2 * i], tonumber(ARGV[4 + 2 * i])
  local record = KEYS[1 + i]
  local rec = rcall('GET', record)
  local f = rec and rec_split(rec)
  if not f or not terminal(f[F_STATUS]) or f[F_COMPLETED] == '' then
    skipped = skipped + 1
  else
    local keep = tonumber(per_type(RETENTION_BY_TYPE, f[F_TYPE], RETENTION))
    local newex = ca + tonumber(f[F_COMPLETED]) + keep
    if gone(f[F_EXPIRES], now) or (keep > 0 and newex <= now) then
      -- already gone for every reader, or gone under the new configuration
      if not dry then
        rcall('DEL', record)
        rcall('ZREM', ARGV[4] .. f[F_STATUS] .. ':' .. f[F_TYPE], id)
        label_move(ARGV[4] .. 'l:', f[F_LABELS], f[F_STATUS], nil, id)
      end
      deleted = deleted + 1
    elseif keep == 0 then
      if f[F_EXPIRES] ~= '' or rcall('PTTL', record) >= 0 then
        if not dry then
          f[F_EXPIRES] = ''
          rcall('SET', record, rec_join(f))
        end
        updated = updated + 1
      else
        unchanged = unchanged + 1
      end
    else
      local exs = fmt_ms(newex)
      if f[F_EXPIRES] == exs and rcall('PTTL', record) >= 0 then
        unchanged = unchanged + 1
      else
        if not dry then
          f[F_EXPIRES] = exs
          rcall('SET', record, rec_join(f), 'PXAT', exs)
          local bend = fmt_ms((math.floor(newex / w) + 1) * w)
          if rcall('RPUSH', ARGV[3] .. bend, bucket_entry(f[F_STATUS], id, f[F_TYPE], f[F_LABELS])) == 1 then
            rcall('ZADD', buckets, bend, bend)
          end
        end
        updated = updated + 1
      end
    end
  end
  i = i + 1
end
return {0, updated, deleted, unchanged, skipped}

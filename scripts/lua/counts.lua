-- counts.lua: exact counts by status of a tenant's requests (GET
-- /v1/requests/counts, docs/reference.md §16) in the shards one server holds
-- (one call per server, as list.lua; the caller sums the calls). Per shard and
-- status, one ZCOUNT of the index the filter names: the label index of the
-- term, else the (status, type) index of the type, else the (status, type)
-- index of every type of the shard (the meta hash's t: fields). An index may
-- still hold terminal requests past their retention that the sweeper has not
-- reached yet; those are all in the retention buckets whose window has
-- started (ARGV[5]), which the script walks to take them off: work that
-- follows the last sweep intervals' terminal requests, not the tenant.
-- KEYS[1] meta hash of the call's first shard
-- KEYS[2], KEYS[3] read-rate counters (optional: the call holding shard 0)
-- ARGV[1] now (unix ms)     ARGV[2] type filter or ""
-- ARGV[3] label term "name=value" or ""
-- ARGV[4] min score ("-inf" or ms)   ARGV[5] max score ("+inf" or ms)
-- ARGV[6] bucket horizon: now + the bucket width (buckets ending before it
--         may hold records past retention)
-- ARGV[7 + 5i .. 11 + 5i] per shard: meta hash, index key prefix, retention
--         bucket index, retention bucket key prefix, record key prefix
-- Returns {code, queued, processing, succeeded, failed, cancelled, expired}
-- (code as list.lua's) | {2} tenant frozen | {"9" .. rate part}
--- @include "rcall"
--- @include "rate_gate"
--- @include "rec_head"
--- @include "gone"
local now, typ, term, mins, maxs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local shards = {}
for i = 7, #ARGV, 5 do
  if rcall('HGET', ARGV[i], 'fz') == '1' then return {2} end
  shards[#shards + 1] = {meta = ARGV[i], prefix = ARGV[i + 1], rbi = ARGV[i + 2], rb = ARGV[i + 3], rec = ARGV[i + 4]}
end
local ok, rl = rate_gate(2, RL_READ_LIMIT, RL_READ_WINDOW, now)
if not ok then return {'9' .. rl} end

local letters = S_ALL
local at = {}
for i, st in ipairs(letters) do at[st] = i end
local n = {0, 0, 0, 0, 0, 0}
local lo, hi = tonumber(mins), tonumber(maxs) -- nil for -inf, +inf
local function id_ms(id)
  return tonumber(string.sub(id, 1, 8) .. string.sub(id, 10, 13), 16)
end
for _, sh in ipairs(shards) do
  local types = {typ}
  if term == '' and typ == '' then
    types = {}
    for _, f in ipairs(rcall('HKEYS', sh.meta)) do
      if string.sub(f, 1, 2) == 't:' then types[#types + 1] = string.sub(f, 3) end
    end
  end
  for i, st in ipairs(letters) do
    if term ~= '' then
      n[i] = n[i] + rcall('ZCOUNT', sh.prefix .. 'l:' .. st .. ':' .. term, mins, maxs)
    else
      for _, t in ipairs(types) do
        n[i] = n[i] + rcall('ZCOUNT', sh.prefix .. st .. ':' .. t, mins, maxs)
      end
    end
  end
  -- records past retention still indexed: in the buckets whose window started
  local seen = {}
  for _, bend in ipairs(rcall('ZRANGEBYSCORE', sh.rbi, '-inf', '(' .. ARGV[6])) do
    for _, e in ipairs(rcall('LRANGE', sh.rb .. bend, 0, -1)) do
      local st, id, et = string.sub(e, 1, 1), string.sub(e, 2, 37), string.sub(e, 38)
      local labels = ''
      local cut = string.find(et, '\31', 1, true)
      if cut then
        labels = string.sub(et, cut + 1)
        et = string.sub(et, 1, cut - 1)
      end
      local ms = id_ms(id)
      if at[st] and not seen[id] and (not lo or ms >= lo) and (not hi or ms <= hi)
        and (typ == '' or et == typ)
        and (term == '' or string.find(',' .. labels .. ',', ',' .. term .. ',', 1, true)) then
        seen[id] = true
        local ix = sh.prefix .. st .. ':' .. et
        if term ~= '' then ix = sh.prefix .. 'l:' .. st .. ':' .. term end
        if rcall('ZSCORE', ix, id) then
          local head = rcall('GETRANGE', sh.rec .. id, 0, 99)
          local dead = head == ''
          if not dead then
            local _, _, ex = rec_head(head)
            dead = gone(ex, now)
          end
          if dead then n[at[st]] = n[at[st]] - 1 end
        end
      end
    end
  end
end
return {'0' .. rl, n[1], n[2], n[3], n[4], n[5], n[6]}

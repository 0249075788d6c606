-- lib.lua: helpers prepended to every script by the Go loader (scripts.go).
-- Portable Lua only (Redis 7 and miniredis): no cjson, no cmsgpack, no bit; numbers
-- leave Lua through string.format('%.0f') so both runtimes print them alike.
local rcall = redis.call

-- fmt_ms prints a whole number of milliseconds without exponent.
local function fmt_ms(n)
  return string.format('%.0f', n)
end

-- per_type looks up type t in a spec ";t1=v1;t2=v2;" and falls back to default.
local function per_type(spec, t, default)
  if spec == nil or spec == '' then return default end
  local key = ';' .. t .. '='
  local i = string.find(spec, key, 1, true)
  if not i then return default end
  local s = i + #key
  local e = string.find(spec, ';', s, true)
  return string.sub(spec, s, e - 1)
end

-- record_reply copies a HGETALL reply, leaving out pacing fields ("~caller"),
-- which belong to the record's life but not to its representation.
local function record_reply(out, flat)
  for i = 1, #flat, 2 do
    if string.byte(flat[i], 1) ~= 126 then
      out[#out + 1] = flat[i]
      out[#out + 1] = flat[i + 1]
    end
  end
  return out
end

-- field reads one field out of a HGETALL reply.
local function field(flat, name)
  for i = 1, #flat, 2 do
    if flat[i] == name then return flat[i + 1] end
  end
  return nil
end

-- gone reports whether a record is past its retention even if its TTL has not fired yet.
local function gone(flat, now)
  local ex = field(flat, 'ex')
  return ex ~= nil and tonumber(ex) <= tonumber(now)
end

local function terminal(st)
  return st == 's' or st == 'f' or st == 'c' or st == 'e'
end

-- emit_webhooks appends one outbox entry (XADD to the tenant's outbox stream)
-- per webhook endpoint whose event filter (a string of event letters in the
-- filter hash: q created, p processing, s f c e terminal) contains ev. The
-- entry holds the endpoint id, the event, the message id (the same for every
-- endpoint and every retry, and recognisable: msg_<request id>_<ev>), the time,
-- the request id and the record's fields as they are now (flat, as decodeRecord
-- reads them), without pacing fields ("~caller") and events ("e"), so that Go
-- builds the representation of this moment without cjson. maxlen bounds the
-- stream (MAXLEN ~) as a guard; delivered and failed entries are removed one by
-- one by the dispatcher. With no endpoint (HGETALL empty), nothing is written.
-- Returns the number of entries added.
local function emit_webhooks(hooks, outbox, maxlen, ev, id, now, flat)
  local eps = rcall('HGETALL', hooks)
  if #eps == 0 then return 0 end
  local entry = nil
  local n = 0
  for i = 1, #eps, 2 do
    if string.find(eps[i + 1], ev, 1, true) then
      if entry == nil then
        entry = {'_ep', '', '_ev', ev, '_id', 'msg_' .. id .. '_' .. ev, '_at', now, '_rq', id}
        for j = 1, #flat, 2 do
          local f = flat[j]
          if string.byte(f, 1) ~= 126 and f ~= 'e' then
            entry[#entry + 1] = f
            entry[#entry + 1] = flat[j + 1]
          end
        end
      end
      entry[2] = eps[i]
      rcall('XADD', outbox, 'MAXLEN', '~', maxlen, '*', unpack(entry))
      n = n + 1
    end
  end
  return n
end

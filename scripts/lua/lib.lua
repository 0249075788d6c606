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

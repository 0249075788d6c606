-- lib.lua: helpers for the scripts. A script names each helper it uses in a
-- '--- @include "name"' line; the Go loader (internal/store/scripts.go, libFor)
-- prepends the paragraphs (blocks between blank lines) defining them, with the
-- ones those paragraphs include in turn, and refuses a script that uses a
-- helper it does not include. Keep one helper with its comment and its own
-- includes per paragraph, no blank line inside one, and a helper after those
-- it includes.
-- Portable Lua only (Redis 7 and miniredis): no cjson, no cmsgpack, no bit; numbers
-- leave Lua through string.format('%d') so both runtimes print them alike.
local rcall = redis.call

-- fmt_ms prints a whole number of milliseconds without exponent. '%d' (a C
-- long in Redis, an int64 in miniredis) costs Redis a third of what '%.0f'
-- (a double through printf) did: 1,400 instructions against 4,100.
local function fmt_ms(n)
  return string.format('%d', n)
end

--- @include "rcall"
--- @include "fmt_ms"
-- rate_count counts one call against its credential's fixed window (counter
-- ckey, climit calls per cwindow ms) and then, only if that allows it, against
-- its tenant's (tkey, ...), so that a credential ignoring Retry-After spends its
-- own budget, not its tenant's. ulule/limiter's semantics and counters, shared
-- with internal/ratelimit: INCRBY; a window starts at a counter's first hit,
-- which sets its PEXPIRE, and lasts one period. Windows are strings (PEXPIRE's
-- argument), now a number. Returns whether the call is allowed, then the part
-- of the reply, right after its code digit, that tells Go (decodeReply) the
-- binding window: ":<limit>,<remaining>,<end ms>;", the refusing window, else
-- the one with fewer calls left. Only the binding window's PTTL is read. inc
-- (default 1) is how many calls this one counts as (a lookup of n ids: n).
local function rate_count(ckey, climit, cwindow, tkey, tlimit, twindow, now, inc)
  inc = inc or 1
  local function reply(key, n, window, limit, left)
    local ends = now + tonumber(window)
    if n > inc then
      local ttl = rcall('PTTL', key)
      if ttl < 0 then -- a counter that lost its TTL must not block forever
        rcall('PEXPIRE', key, window)
      else
        ends = now + ttl
      end
    end
    return ':' .. fmt_ms(limit) .. ',' .. fmt_ms(left) .. ',' .. fmt_ms(ends) .. ';'
  end
  local c = rcall('INCRBY', ckey, inc)
  if c == inc then rcall('PEXPIRE', ckey, cwindow) end
  if c > climit then return false, reply(ckey, c, cwindow, climit, 0) end
  local t = rcall('INCRBY', tkey, inc)
  if t == inc then rcall('PEXPIRE', tkey, twindow) end
  if t > tlimit then return false, reply(tkey, t, twindow, tlimit, 0) end
  if tlimit - t < climit - c then return true, reply(tkey, t, twindow, tlimit, tlimit - t) end
  return true, reply(ckey, c, cwindow, climit, climit - c)
end

--- @include "rate_count"
-- rate_gate counts a call whose two rate counters, the credential's and its
-- tenant's, are KEYS[i] and KEYS[i + 1] (both absent: the call is not
-- counted) against its scope's limit and window and then the tenant's
-- (rate_count). Every script that counts calls it before it reads or writes
-- anything else. Returns whether the call may go on, then rate_count's reply
-- part ('' when not counted). inc: as rate_count's.
local function rate_gate(i, limit, window, now, inc)
  if not KEYS[i + 1] then return true, '' end
  return rate_count(KEYS[i], limit, window, KEYS[i + 1], RL_TENANT_LIMIT, RL_TENANT_WINDOW, tonumber(now), inc)
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

-- The record is one string of RECORD_FIELDS fields joined by byte 31 (unit
-- separator). Its layout is defined once, in internal/store/record.go, and
-- reaches the scripts as constants: the field positions F_STATUS, F_VERSION,
-- ... (1-based, for the table rec_split returns), RECORD_FIELDS and
-- RECORD_SPLIT, the pattern that cuts a record.
local SEP = '\31'

-- rec_split cuts a record into its fields. One string.match with a capture
-- per field (RECORD_SPLIT): half the Redis time of a loop of string.find and
-- string.sub. A record written before tracing has one field less (it ends
-- with the labels), one written before labels two (it ends with the
-- cancellation): each is cut as one with the missing fields empty.
local function rec_split(s)
  local f = {string.match(s, RECORD_SPLIT)}
  if f[1] == nil then f = {string.match(s .. '\31', RECORD_SPLIT)} end
  if f[1] == nil then f = {string.match(s .. '\31\31', RECORD_SPLIT)} end
  return f
end

--- @include "SEP"
local function rec_join(t)
  return table.concat(t, SEP, 1, RECORD_FIELDS)
end

-- rec_head reads status, type and expires_at without cutting the whole record
-- (poll, delete and sweep only need these). It also reads a head cut by GETRANGE.
-- Its pattern assumes fields 1, 3 and 4 (record.go pins them there).
local function rec_head(s)
  return string.match(s, '^(.)\31[^\31]*\31([^\31]*)\31([^\31]*)')
end

-- gone reports whether a record is past its retention even if its TTL has not
-- fired yet (ex is the record's expires_at field, "" when kept forever).
local function gone(ex, now)
  return ex ~= '' and tonumber(ex) <= tonumber(now)
end

local function terminal(st)
  return st == S_SUCCEEDED or st == S_FAILED or st == S_CANCELLED or st == S_EXPIRED
end

--- @include "rcall"
-- emit_webhooks appends one outbox entry (XADD to the tenant's outbox stream)
-- per webhook endpoint whose event filter (a string of event letters in the
-- filter hash: q created, p processing, s f c e terminal) contains ev. The
-- entry holds the endpoint id, the event, the message id (the same for every
-- endpoint and every retry, and recognisable: msg_<request id>_<ev>), the time,
-- the request id and the record string as it is now, so that Go builds the
-- representation of this moment. maxlen bounds the stream (MAXLEN ~) as a
-- guard; delivered and failed entries are removed one by one by the dispatcher.
-- With no endpoint (HGETALL empty), nothing is written. Returns the number of
-- entries added.
local function emit_webhooks(hooks, outbox, maxlen, ev, id, now, rec)
  local eps = rcall('HGETALL', hooks)
  if #eps == 0 then return 0 end
  local n = 0
  for i = 1, #eps, 2 do
    if string.find(eps[i + 1], ev, 1, true) then
      rcall('XADD', outbox, 'MAXLEN', '~', maxlen, '*', '_ep', eps[i], '_ev', ev,
        '_id', 'msg_' .. id .. '_' .. ev, '_at', now, '_rq', id, '_r', rec)
      n = n + 1
    end
  end
  return n
end

--- @include "rcall"
-- audit_add appends one audit entry to the tenant's audit stream, in the step
-- that made the change (docs/operations.md, Audit trail): one value, fields
-- joined by byte 31: request id, version after the change, the /events seq of
-- the status event, from and to (status letters, "" for none), by, the time,
-- the request type and, for a failure, its code. Nothing else of the request
-- (context, result, progress, reasons) ever enters it. With AUDIT_BOUND
-- entries already waiting (the sink is failing), the entry is not written and
-- the tenant meta hash's field ad counts it, so that the drainer reports the
-- gap. Callers skip it when AUDIT_BOUND is 0 (audit.sink none).
local function audit_add(audit, meta, id, v, seq, from, to, by, now, typ, code)
  if rcall('XLEN', audit) >= AUDIT_BOUND then
    rcall('HINCRBY', meta, 'ad', 1)
    return
  end
  rcall('XADD', audit, '*', 'e', id .. '\31' .. v .. '\31' .. seq .. '\31' .. from .. '\31' .. to .. '\31' .. by ..
    '\31' .. now .. '\31' .. typ .. '\31' .. code)
end

-- audit_seq is the /events seq of a record's latest status event, from its
-- events field (the events after the first, at most two).
local function audit_seq(ev)
  if ev == '' then return '1' end
  if string.find(ev, ',', 1, true) then return '3' end
  return '2'
end

-- failure_code is the code of a failure payload ({"code":"...",...}, which Go
-- always writes code first) for statuses failed and expired, else "".
local function failure_code(to, payload)
  if to ~= S_FAILED and to ~= S_EXPIRED then return '' end
  return string.match(payload, '^{"code":"([^"]*)"') or ''
end

-- bucket_entry is a retention bucket's entry: "<status letter><id><type>",
-- then byte 31 and the labels when there are any (the sweeper names the
-- label index entries from them once the record is gone).
local function bucket_entry(st, id, typ, labels)
  if labels == nil or labels == '' then return st .. id .. typ end
  return st .. id .. typ .. '\31' .. labels
end

--- @include "rcall"
-- label_move moves a request's entries in the label indexes (one zset per
-- status and label, "<lix><status letter>:<name>=<value>", lix the index key
-- prefix plus "l:", score created_at) from status from to status to; either
-- may be nil (create adds, delete and retention remove). labels is the
-- record's labels field: "name=value" pairs joined by ",", "" for none.
local function label_move(lix, labels, from, to, id, ca)
  if labels == nil or labels == '' then return end
  for term in string.gmatch(labels, '[^,]+') do
    if from then rcall('ZREM', lix .. from .. ':' .. term, id) end
    if to then rcall('ZADD', lix .. to .. ':' .. term, ca, id) end
  end
end

--- @include "rcall"
-- index_refill reads the next chunk of an index iterator (list.lua,
-- list_labels.lua: it.key read newest first between the scores maxs and
-- mins, from it.off) into it.buf, it.i; chunks start at it.size entries and
-- double on every refill, up to 1000 (one index usually holds most of a
-- page; the others then cost a few entries each); it.eof once it is read.
local function index_refill(it, maxs, mins)
  local r = rcall('ZREVRANGEBYSCORE', it.key, maxs, mins, 'LIMIT', it.off, it.size)
  it.off = it.off + #r
  if #r < it.size then it.eof = true end
  it.buf, it.i = r, 1
  it.size = math.min(it.size * 2, 1000)
end

-- heap_up restores a binary max-heap of tables by their field h after
-- heap[i] was added or grew: list.lua and list_labels.lua merge their index
-- iterators by head id in one (a page costs one first read per opened index
-- plus O(log k) per id, not k comparisons per id).
local function heap_up(heap, i)
  while i > 1 do
    local p = math.floor(i / 2)
    if heap[p].h >= heap[i].h then return end
    heap[p], heap[i] = heap[i], heap[p]
    i = p
  end
end

--- @include "heap_up"
-- heap_push adds the index iterator it to heap by its head id (head(it)
-- loads it), unless its index has no id left.
local function heap_push(heap, it, head)
  local h = head(it)
  if h then
    it.h = h
    heap[#heap + 1] = it
    heap_up(heap, #heap)
  end
end

-- heap_down restores a heap_up heap after heap[i] shrank.
local function heap_down(heap, i)
  local n = #heap
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= n and heap[l].h > heap[m].h then m = l end
    if r <= n and heap[r].h > heap[m].h then m = r end
    if m == i then return end
    heap[m], heap[i] = heap[i], heap[m]
    i = m
  end
end

--- @include "heap_down"
-- heap_pop drops heap[1] and restores the heap.
local function heap_pop(heap)
  heap[1] = heap[#heap]
  heap[#heap] = nil
  if #heap > 0 then heap_down(heap, 1) end
end

--- @include "heap_down"
--- @include "heap_pop"
-- merge_page takes one page of ids, newest first, from heap, a heap_up heap
-- of index iterators by head id (it.h; it.n: the 1-based shard the index is
-- of; it.i: the place of the head in its buffer): at most want ids below the
-- cursor cid ('' on the first page), skipping those at or above it (listed
-- already: same millisecond as the cursor, larger id). head(it) loads an
-- iterator's next id (nil when none is left); fill, called before each id,
-- may open more iterators. Returns the listing reply {'0' .. rl, more,
-- last_id, id1, shard1, ...} (list.lua's header says what each means).
local function merge_page(heap, head, fill, want, cid, rl)
  local function advance(it)
    it.i = it.i + 1
    local h = head(it)
    if h then
      it.h = h
      heap_down(heap, 1)
    else
      heap_pop(heap)
    end
  end
  local out = {'0' .. rl, 0, ''}
  local found = 0
  while true do
    fill()
    local it = heap[1]
    if not it then break end
    local id = it.h
    if cid ~= '' and id >= cid then
      advance(it)
    else
      if found == want then
        out[2] = 1
        break
      end
      local n = it.n
      advance(it)
      found = found + 1
      out[#out + 1] = id
      out[#out + 1] = n
      out[3] = id
    end
  end
  return out
end

--- @include "rcall"
-- changelog_add appends a change to the tenant shard's change log (watches,
-- docs/reference.md §16) while the shard is watched: cw is the meta hash's
-- field cw, until when (unix ms) a watch may still resume, nil when never.
-- The log and the change channel are named from the meta hash's key
-- ("<prefix>:<tag>:m" -> ":cl", ":w"; keys.changeLog), so that a write of a
-- shard nobody watches passes no more arguments than before. announce: also
-- announce the change on the channel, as transition.lua does already
-- (create.lua has no waiters of its own to wake, only watches).
local function changelog_add(meta, announce, cw, id, v, now, rec)
  if not cw or tonumber(cw) < tonumber(now) then return end
  local base = string.sub(meta, 1, -2)
  rcall('XADD', base .. 'cl', '*', 'i', id, 'r', rec)
  if announce then rcall(PUBLISH, base .. 'w', id .. ',' .. v) end
end

-- id_before tells whether stream id a ("<ms>-<seq>") comes before stream id
-- b; an id that is not one comes first. Both parts are compared as digit
-- strings, by length and then by text: exact for every 64-bit part, where
-- tonumber rounds past 2^53 (and the embedded store's Lua gives nil past
-- 2^63, as in the "<ms>-18446744073709551615" that marks the end of a
-- millisecond).
local function id_before(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am or not bm then return true end
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end

-- list.lua: the ids of one page of a tenant's requests, newest first (created_at
-- descending, ties by id descending), from the (status, type) indexes (spec §4).
-- It returns ids only; the caller reads the records in one more round trip (MGET)
-- and drops those that changed or vanished in between.
-- Order: every index entry's score is its id's own UUIDv7 millisecond (create.lua
-- sets created_at from the id), so (score, id) order is plain id order: the merge
-- compares ids, and reads no scores (formatting scores costs more than the walk).
-- Plan: a request is in exactly one index, "<ix prefix><status letter>:<type>";
-- a k-way merge of the indexes of the filter's statuses (all six without one)
-- and of its type (every type of the tenant without one: the t:<type> fields of
-- the meta hash) yields
-- exactly the matching ids: nothing is read that the page does not show.
-- Lazy plan (ARGV[8] given, and no type filter: what a sharded tenant's
-- unfiltered or status-filtered page asks of each shard): the index-head
-- summaries ("<ARGV[8]><status letter>", keys.indexHeads, one zset per status)
-- hold, per type, a score at least the newest created_at in that (status, type)
-- index (create.lua and transition.lua raise it with ZADD GT; removals leave it
-- high). Read newest first, they stream the indexes in the order of their
-- possible heads, and an index is opened (one range read) only once its bound
-- reaches the merge's current top: a page opens the indexes that hold its
-- entries, plus those whose bound is stale or lies above the cursor (a page deep
-- in the listing still opens every index with an entry above its position),
-- instead of every index of every type. A first page (no upper bound) lowers a
-- stale bound to the index's real head, or drops an empty index's member. The
-- summaries are trusted once the meta hash's field lh is "1"; before that (a
-- shard written by a version without them) this script builds them from every
-- index's head and sets lh, once per shard.
-- KEYS[1] tenant meta hash
-- ARGV[1] status letters, e.g. "sf" (all six without a status filter)
-- ARGV[2] type filter, or "" (every type of the tenant)
-- ARGV[3] max score: newest created_at (ms) still wanted, inclusive, or "+inf"
--         (with a cursor: at most the cursor's created_at)
-- ARGV[4] min score: oldest created_at (ms) still wanted, inclusive, or "-inf"
-- ARGV[5] cursor id ("" on the first page): resume with ids below it
-- ARGV[6] want: ids to return (>= 1)
-- ARGV[7] index key prefix ("<prefix>:{<tenant>}:ix:"): the indexes are named
--         here, from the types (same hash tag, so this slot)
-- ARGV[8] index-head summary prefix ("<prefix>:{<tenant>}:ixh:", same slot) for
--         the lazy plan (ignored with a type filter), or "": every index of the
--         filter is opened
-- KEYS[2] credential read-rate counter, KEYS[3] tenant rate counter, ARGV[9] now
--         (unix ms): all three optional, given to the first shard's call of a
--         listing only, which then counts it against ratelimit.read and
--         .tenant before anything else is read (rate_gate)
-- Constants: RL_READ_LIMIT, RL_READ_WINDOW (ms, a string), RL_TENANT_LIMIT,
-- RL_TENANT_WINDOW.
-- Returns {code, more, last_id, id1, id2, ...}, code "0" and, when counted,
-- rate_count's ":<limit>,<remaining>,<reset>;"
--   more: 1 when more ids follow (a next page);
--   last_id: position to resume after ("" when nothing was returned).
--         | {2} tenant frozen | {"9" .. rate part} rate limited
--- @include "rcall"
--- @include "rate_gate"
--- @include "fmt_ms"
local maxs, mins = ARGV[3], ARGV[4]
local cid = ARGV[5]
local has_cursor = cid ~= ''
local want = tonumber(ARGV[6])
local prefix = ARGV[7]
local heads = ARGV[8]
local lazy = heads ~= '' and ARGV[2] == ''

local flags = rcall('HMGET', KEYS[1], 'fz', 'lh')
if flags[1] == '1' then return {2} end
local ok, rl = rate_gate(2, RL_READ_LIMIT, RL_READ_WINDOW, ARGV[9])
if not ok then return {'9' .. rl} end

-- tenant_types: the types of the meta hash's t:<type> fields
local function tenant_types()
  local types = {}
  for _, f in ipairs(rcall('HKEYS', KEYS[1])) do
    if string.sub(f, 1, 2) == 't:' then types[#types + 1] = string.sub(f, 3) end
  end
  return types
end

-- One iterator per opened index, reading it newest first in chunks that start
-- at first entries and double on every refill (one index usually holds most of
-- a page; the others then cost a few entries each).
local function iterator(key, first)
  return {key = key, buf = {}, i = 1, off = 0, size = first, eof = false}
end

local function head(it)
  while true do
    local id = it.buf[it.i]
    if id then return id end
    if it.eof then return nil end
    local r = rcall('ZREVRANGEBYSCORE', it.key, maxs, mins, 'LIMIT', it.off, it.size)
    it.off = it.off + #r
    if #r < it.size then it.eof = true end
    it.buf, it.i = r, 1
    it.size = math.min(it.size * 2, 1000)
  end
end

-- The iterators with a head, in a binary max-heap by head id: a page costs one
-- first read per opened index plus O(log k) per id, not k comparisons per id.
local heap = {}
local function up(i)
  while i > 1 do
    local p = math.floor(i / 2)
    if heap[p].h >= heap[i].h then return end
    heap[p], heap[i] = heap[i], heap[p]
    i = p
  end
end
local function down(i)
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
local function push(it)
  local h = head(it)
  if h then
    it.h = h
    heap[#heap + 1] = it
    up(#heap)
  end
end

-- id_ms is the UUIDv7 millisecond of an id (its first 12 hex digits): the
-- score of its index entries.
local function id_ms(id)
  return tonumber(string.sub(id, 1, 8) .. string.sub(id, 10, 13), 16)
end

-- The unopened indexes, for the lazy plan: per status of the filter, the
-- summary's types, newest bound first, read in chunks. pending() is the next
-- one of them all (stream, type, bound), nil when none is left.
-- With an upper bound (a cursor, created_before), the indexes whose score is
-- at or above it all have that bound: they are opened at once (below), and the
-- streams start under it.
local top = tonumber(maxs) -- nil for +inf
local below = '+inf'
if top then below = '(' .. maxs end
local streams = {}
for i = 1, #ARGV[1] do
  local st = string.sub(ARGV[1], i, i)
  streams[i] = {st = st, key = heads .. st, buf = {}, i = 1, off = 0, size = 8, eof = false}
end
local function peek(sm)
  while true do
    local m = sm.buf[sm.i]
    if m then return m, tonumber(sm.buf[sm.i + 1]) end
    if sm.eof then return nil end
    local r = rcall('ZREVRANGEBYSCORE', sm.key, below, mins, 'WITHSCORES', 'LIMIT', sm.off, sm.size)
    sm.off = sm.off + #r / 2
    if #r / 2 < sm.size then sm.eof = true end
    sm.buf, sm.i = r, 1
    sm.size = math.min(sm.size * 2, 512)
  end
end
local function pending()
  local best, bt, bb
  for i = 1, #streams do
    local t, b = peek(streams[i])
    if t and (not best or b > bb) then best, bt, bb = streams[i], t, b end
  end
  return best, bt, bb
end

-- open_pending opens the next summary member: an iterator on its index, whose
-- first read also shows whether its bound was stale (then, on a first page,
-- the bound is lowered to the real head, or the member dropped: in heals,
-- applied at the end, since the summary is being read by offset meanwhile).
local lazy_first = math.min(want + 1, 4)
local heals = {}
local function open_pending(sm, t, bound)
  sm.i = sm.i + 2
  local it = iterator(prefix .. sm.st .. ':' .. t, lazy_first)
  push(it)
  if maxs == '+inf' then
    if it.h then
      local ms = id_ms(it.h)
      if ms < bound then heals[#heals + 1] = {sm.key, t, fmt_ms(ms)} end
    elseif mins == '-inf' then
      heals[#heals + 1] = {sm.key, t}
    end
  end
end

-- fill opens every unopened index that may hold an id at least the heap's
-- top: afterwards the top (if any) is the newest id left of every index.
local fill = function() end
if lazy then
  if flags[2] ~= '1' then
    -- a shard written without the summaries: build them from every index's head
    local types = tenant_types()
    for _, st in ipairs({'q', 'p', 's', 'f', 'c', 'e'}) do
      rcall('DEL', heads .. st)
      for j = 1, #types do
        local r = rcall('ZREVRANGE', prefix .. st .. ':' .. types[j], 0, 0, 'WITHSCORES')
        if r[1] then rcall('ZADD', heads .. st, r[2], types[j]) end
      end
    end
    -- (a shard with no type yet has nothing to build, and no meta hash to mark)
    if #types > 0 then rcall('HSET', KEYS[1], 'lh', '1') end
  end
  if top then
    -- the indexes with an entry at or above the bound may hold any id under
    -- it: opened now, each first read a fair share of the page (as the eager
    -- plan does)
    local over = {}
    for _, sm in ipairs(streams) do
      for _, t in ipairs(rcall('ZRANGEBYSCORE', sm.key, maxs, '+inf')) do
        over[#over + 1] = prefix .. sm.st .. ':' .. t
      end
    end
    local first = want + 1
    if #over > 1 then first = math.floor(first / #over) + 2 end
    for _, key in ipairs(over) do push(iterator(key, first)) end
  end
  fill = function()
    while true do
      local sm, t, bound = pending()
      if not sm then return end
      if top and bound > top then bound = top end
      local it = heap[1]
      if it and bound < id_ms(it.h) then return end
      open_pending(sm, t, bound)
    end
  end
else
  local types = {ARGV[2]}
  if ARGV[2] == '' then types = tenant_types() end
  local drivers = {}
  for i = 1, #ARGV[1] do
    local st = string.sub(ARGV[1], i, i)
    for j = 1, #types do
      drivers[#drivers + 1] = prefix .. st .. ':' .. types[j]
    end
  end
  -- every index opened at once, each first read a fair share of the page
  local first = want + 1
  if #drivers > 1 then first = math.floor(first / #drivers) + 2 end
  for i = 1, #drivers do push(iterator(drivers[i], first)) end
end

-- advance moves the top iterator past its head and restores the heap.
local function advance(it)
  it.i = it.i + 1
  local h = head(it)
  if h then
    it.h = h
    down(1)
  else
    heap[1] = heap[#heap]
    heap[#heap] = nil
    if #heap > 0 then down(1) end
  end
end

local out = {'0' .. rl, 0, ''}
local found = 0
while true do
  fill()
  local it = heap[1]
  if not it then break end
  local id = it.h
  if has_cursor and id >= cid then
    -- listed already (same millisecond as the cursor, larger id)
    advance(it)
  else
    if found == want then
      out[2] = 1
      break
    end
    advance(it)
    found = found + 1
    out[#out + 1] = id
    out[3] = id
  end
end
for _, h in ipairs(heals) do
  if h[3] then rcall('ZADD', h[1], 'XX', h[3], h[2]) else rcall('ZREM', h[1], h[2]) end
end
return out

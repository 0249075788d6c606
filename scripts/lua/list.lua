-- list.lua: the ids of one page of a tenant's requests, newest first (created_at
-- descending, ties by id descending), from the (status, type) indexes (docs/reference.md §4).
-- It returns ids only; the caller reads the records in one more round trip (MGET)
-- and drops those that changed or vanished in between.
-- Order: every index entry's score is its id's own UUIDv7 millisecond (create.lua
-- sets created_at from the id), so (score, id) order is plain id order: the merge
-- compares ids, and reads no scores (formatting scores costs more than the walk).
-- Plan: a request is in exactly one index, "<ix prefix><status letter>:<type>";
-- a k-way merge of the indexes of the filter's statuses (all six without one)
-- and of its type (every type of the tenant without one: the t:<type> fields of
-- each shard's meta hash) yields
-- exactly the matching ids: nothing is read that the page does not show.
-- Lazy plan (ARGV[7] "1", and no type filter: what a sharded tenant's
-- unfiltered or status-filtered page asks of its shards): the index-head
-- summaries ("<summary prefix><status letter>", keys.indexHeads, one zset per
-- shard and status)
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
-- Several shards at once: a call names the shards it reads (ARGV[9..]), all
-- held by the server it runs on (one server holds every shard; on a Cluster,
-- the shards of one master: Store.shardGroups), and merges their indexes in
-- one heap, so that a page costs one call per server, not one per shard. Only
-- KEYS[1] (the first shard's meta hash) and the rate counters, which share its
-- slot, are declared: Redis routes the call by them and lets a script without
-- a shebang line reach keys of other slots of the same node (a slot that has
-- moved away fails the call, "Script attempted to access a non local key",
-- and the caller asks shard by shard).
-- KEYS[1] meta hash of the first shard named in ARGV[9..]
-- ARGV[1] status letters, e.g. "sf" (all six without a status filter)
-- ARGV[2] type filter, or "" (every type of the tenant)
-- ARGV[3] max score: newest created_at (ms) still wanted, inclusive, or "+inf"
--         (with a cursor: at most the cursor's created_at)
-- ARGV[4] min score: oldest created_at (ms) still wanted, inclusive, or "-inf"
-- ARGV[5] cursor id ("" on the first page): resume with ids below it
-- ARGV[6] want: ids to return (>= 1), of all the call's shards together
-- ARGV[7] "1": the lazy plan (ignored with a type filter); "": every index of
--         the filter is opened
-- ARGV[8] now (unix ms), with KEYS[2..3]
-- ARGV[9 + 3i], ARGV[10 + 3i], ARGV[11 + 3i], for the call's shards i = 0, 1,
--         ...: the shard's meta hash, its index key prefix
--         ("<prefix>:{<tag>}:ix:": the indexes are named here, from the types)
--         and its index-head summary prefix ("<prefix>:{<tag>}:ixh:")
-- KEYS[2] credential read-rate counter, KEYS[3] tenant rate counter: both
--         optional, given to the call holding the tenant's shard 0 of a
--         listing's first round only, which then counts it against
--         ratelimit.read and .tenant before anything else is read (rate_gate)
-- Constants: RL_READ_LIMIT, RL_READ_WINDOW (ms, a string), RL_TENANT_LIMIT,
-- RL_TENANT_WINDOW.
-- Returns {code, more, last_id, id1, shard1, id2, shard2, ...}, code "0" and,
-- when counted, rate_count's ":<limit>,<remaining>,<reset>;"; shard: the
-- 1-based place in ARGV[9..] of the shard whose index gave the id
--   more: 1 when more ids follow (a next page);
--   last_id: position to resume after ("" when nothing was returned).
--         | {2} tenant frozen | {"9" .. rate part} rate limited
--- @include "rcall"
--- @include "rate_gate"
--- @include "fmt_ms"
--- @include "index_refill"
--- @include "heap_up"
--- @include "heap_push"
--- @include "heap_down"
--- @include "heap_pop"
--- @include "merge_page"
local maxs, mins = ARGV[3], ARGV[4]
local cid = ARGV[5]
local want = tonumber(ARGV[6])
local lazy = ARGV[7] == '1' and ARGV[2] == ''

-- the call's shards: meta hash, index prefix, summary prefix, flags
local shards = {}
for i = 9, #ARGV, 3 do
  local sh = {meta = ARGV[i], prefix = ARGV[i + 1], heads = ARGV[i + 2], n = #shards + 1}
  local flags = rcall('HMGET', sh.meta, 'fz', 'lh')
  if flags[1] == '1' then return {2} end
  sh.built = flags[2] == '1'
  shards[#shards + 1] = sh
end
local ok, rl = rate_gate(2, RL_READ_LIMIT, RL_READ_WINDOW, ARGV[8])
if not ok then return {'9' .. rl} end

-- tenant_types: the types of a meta hash's t:<type> fields
local function tenant_types(meta)
  local types = {}
  for _, f in ipairs(rcall('HKEYS', meta)) do
    if string.sub(f, 1, 2) == 't:' then types[#types + 1] = string.sub(f, 3) end
  end
  return types
end

-- One iterator per opened index, reading it newest first in chunks that start
-- at first entries (index_refill).
local function iterator(key, first, n)
  return {key = key, buf = {}, i = 1, off = 0, size = first, eof = false, n = n}
end

local function head(it)
  while true do
    local id = it.buf[it.i]
    if id then return id end
    if it.eof then return nil end
    index_refill(it, maxs, mins)
  end
end

-- The iterators with a head are in heap, by head id (merge_page), and the
-- lazy plan's summary streams in streams, by the bound of their next member:
-- both binary max-heaps of lib.lua's heap_up.
local heap = {}
local function push(it) heap_push(heap, it, head) end

-- id_ms is the UUIDv7 millisecond of an id (its first 12 hex digits): the
-- score of its index entries.
local function id_ms(id)
  return tonumber(string.sub(id, 1, 8) .. string.sub(id, 10, 13), 16)
end

-- The unopened indexes, for the lazy plan: per shard and status of the
-- filter, the summary's types, newest bound first, read in chunks; the
-- streams with a member left are in streams, a heap by the bound of that
-- member. With an upper bound (a cursor, created_before), the indexes whose
-- score is at or above it all have that bound: they are opened at once
-- (below), and the streams start under it.
local top = tonumber(maxs) -- nil for +inf
local below = '+inf'
if top then below = '(' .. maxs end
local streams = {}
-- peek loads sm's next member into sm.t, sm.h (its bound); false when none.
local function peek(sm)
  while true do
    local t = sm.buf[sm.i]
    if t then
      sm.t, sm.h = t, tonumber(sm.buf[sm.i + 1])
      return true
    end
    if sm.eof then return false end
    local r = rcall('ZREVRANGEBYSCORE', sm.key, below, mins, 'WITHSCORES', 'LIMIT', sm.off, sm.size)
    sm.off = sm.off + #r / 2
    if #r / 2 < sm.size then sm.eof = true end
    sm.buf, sm.i = r, 1
    sm.size = math.min(sm.size * 2, 512)
  end
end

-- open_pending opens the next summary member of the top stream: an iterator
-- on its index, whose first read also shows whether its bound was stale
-- (then, on a first page, the bound is lowered to the real head, or the
-- member dropped: in heals, applied at the end, since the summary is being
-- read by offset meanwhile).
local lazy_first = math.min(want + 1, 4)
local heals = {}
local function open_pending(sm)
  local t, bound = sm.t, sm.h
  sm.i = sm.i + 2
  if peek(sm) then heap_down(streams, 1) else heap_pop(streams) end
  local it = iterator(sm.prefix .. sm.st .. ':' .. t, lazy_first, sm.n)
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
  local over = {}
  for _, sh in ipairs(shards) do
    if not sh.built then
      -- a shard written without the summaries: build them from every index's head
      local types = tenant_types(sh.meta)
      for _, st in ipairs(S_ALL) do
        rcall('DEL', sh.heads .. st)
        for j = 1, #types do
          local r = rcall('ZREVRANGE', sh.prefix .. st .. ':' .. types[j], 0, 0, 'WITHSCORES')
          if r[1] then rcall('ZADD', sh.heads .. st, r[2], types[j]) end
        end
      end
      -- (a shard with no type yet has nothing to build, and no meta hash to mark)
      if #types > 0 then rcall('HSET', sh.meta, 'lh', '1') end
    end
    for i = 1, #ARGV[1] do
      local st = string.sub(ARGV[1], i, i)
      local sm = {st = st, key = sh.heads .. st, prefix = sh.prefix, n = sh.n,
        buf = {}, i = 1, off = 0, size = 8, eof = false}
      if top then
        -- the indexes with an entry at or above the bound may hold any id
        -- under it: opened now, each first read a fair share of the page (as
        -- the eager plan does)
        for _, t in ipairs(rcall('ZRANGEBYSCORE', sm.key, maxs, '+inf')) do
          over[#over + 1] = {sh.prefix .. st .. ':' .. t, sh.n}
        end
      end
      if peek(sm) then
        streams[#streams + 1] = sm
        heap_up(streams, #streams)
      end
    end
  end
  local first = want + 1
  if #over > 1 then first = math.floor(first / #over) + 2 end
  for _, o in ipairs(over) do push(iterator(o[1], first, o[2])) end
  fill = function()
    while true do
      local sm = streams[1]
      if not sm then return end
      local bound = sm.h
      if top and bound > top then bound = top end
      local it = heap[1]
      if it and bound < id_ms(it.h) then return end
      open_pending(sm)
    end
  end
else
  local drivers = {}
  for _, sh in ipairs(shards) do
    local types = {ARGV[2]}
    if ARGV[2] == '' then types = tenant_types(sh.meta) end
    for i = 1, #ARGV[1] do
      local st = string.sub(ARGV[1], i, i)
      for j = 1, #types do
        drivers[#drivers + 1] = {sh.prefix .. st .. ':' .. types[j], sh.n}
      end
    end
  end
  -- every index opened at once, each first read a fair share of the page
  local first = want + 1
  if #drivers > 1 then first = math.floor(first / #drivers) + 2 end
  for _, d in ipairs(drivers) do push(iterator(d[1], first, d[2])) end
end

local out = merge_page(heap, head, fill, want, cid, rl)
for _, h in ipairs(heals) do
  if h[3] then rcall('ZADD', h[1], 'XX', h[3], h[2]) else rcall('ZREM', h[1], h[2]) end
end
return out

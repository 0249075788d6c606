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
-- KEYS[2] credential read-rate counter, KEYS[3] tenant rate counter, ARGV[8] now
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
local maxs, mins = ARGV[3], ARGV[4]
local cid = ARGV[5]
local has_cursor = cid ~= ''
local want = tonumber(ARGV[6])

if rcall('HGET', KEYS[1], 'fz') == '1' then return {2} end
local ok, rl = rate_gate(2, RL_READ_LIMIT, RL_READ_WINDOW, ARGV[8])
if not ok then return {'9' .. rl} end

local types = {ARGV[2]}
if ARGV[2] == '' then
  types = {}
  for _, f in ipairs(rcall('HKEYS', KEYS[1])) do
    if string.sub(f, 1, 2) == 't:' then types[#types + 1] = string.sub(f, 3) end
  end
end
local drivers = {}
for i = 1, #ARGV[1] do
  local st = string.sub(ARGV[1], i, i)
  for j = 1, #types do
    drivers[#drivers + 1] = ARGV[7] .. st .. ':' .. types[j]
  end
end

-- One iterator per index, reading it newest first in chunks that start at a
-- fair share of the page and double on every refill (one index usually holds
-- most of a page; the others then cost a few entries each).
local first = want + 1
if #drivers > 1 then first = math.floor(first / #drivers) + 2 end
local iters = {}
for i = 1, #drivers do
  iters[i] = {key = drivers[i], buf = {}, i = 1, off = 0, size = first, eof = false}
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
-- first read per index plus O(log k) per id, not k comparisons per id (a tenant
-- with 100 types has 600 indexes to merge when unfiltered).
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
for i = 1, #iters do
  local h = head(iters[i])
  if h then
    iters[i].h = h
    heap[#heap + 1] = iters[i]
    up(#heap)
  end
end

-- next_candidate: the iterator with the largest (newest) head, and that head.
local function next_candidate()
  local it = heap[1]
  if not it then return nil end
  return it, it.h
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
  local it, id = next_candidate()
  if not it then break end
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
return out

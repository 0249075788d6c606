-- list.lua: the ids of one page of a tenant's requests, newest first (created_at
-- descending, ties by id descending), from the status and type indexes (spec §4).
-- It returns ids only; the caller reads the records in one more round trip (a
-- pipeline of HGETALLs; records.lua on the embedded store) and drops those that
-- changed or vanished in between.
-- Order: every index entry's score is its id's own UUIDv7 millisecond (create.lua
-- sets created_at from the id), so (score, id) order is plain id order: the merge
-- compares ids, and reads no scores (formatting scores costs more than the walk).
-- Plan: a k-way merge of the given status sets (all six without a status filter);
-- with a type filter, each candidate's type is read from its record's head
-- (GETRANGE: type is the record's third field), at most ARGV[6] misses per call.
-- There is no type index: a terminal request keeps one index entry, to keep the
-- memory per request small (docs/listing.md has the costs).
-- KEYS[1] tenant meta hash
-- KEYS[2 .. 1+n] status sets (n = ARGV[1]): the filter's, or all six
-- ARGV[1] n: number of status sets      ARGV[2] type filter, or ""
-- ARGV[3] max score: newest created_at (ms) still wanted, inclusive, or "+inf"
--         (with a cursor: at most the cursor's created_at)
-- ARGV[4] min score: oldest created_at (ms) still wanted, inclusive, or "-inf"
-- ARGV[5] cursor id ("" on the first page): resume with ids below it
-- ARGV[6] scan budget: candidates that may be skipped (not matching) in this call
-- ARGV[7] want: ids to return (>= 1)
-- ARGV[8] record key prefix ("<prefix>:{<tenant>}:r:"): with a type filter, the
--         candidates' records (keys of this tenant's slot) are read by name
-- Returns {0, more, last_id, id1, id2, ...}
--   more: 1 when more candidates may follow (a next page, or the budget ran out);
--   last_id: position to resume after ("" when nothing was examined); when the
--   budget runs out it is past the last id returned.
--         | {2} tenant frozen
local meta = KEYS[1]
local n, want_type = tonumber(ARGV[1]), ARGV[2]
local maxs, mins = ARGV[3], ARGV[4]
local cid = ARGV[5]
local has_cursor = cid ~= ''
local budget, want = tonumber(ARGV[6]), tonumber(ARGV[7])
local prefix = ARGV[8]

if rcall('HGET', meta, 'fz') == '1' then return {2} end

local drivers = {}
for i = 1, n do drivers[i] = KEYS[1 + i] end
local check_type = want_type ~= ''

-- One iterator per driver set, reading it newest first in chunks that start at
-- a fair share of the page and double on every refill (one set usually holds
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

-- next_candidate: the largest (newest) head over all iterators.
local function next_candidate()
  local best, bid
  for i = 1, #iters do
    local id = head(iters[i])
    if id and (not best or id > bid) then
      best, bid = iters[i], id
    end
  end
  return best, bid
end

-- Candidates in order, with whether each passes the type check. With a check,
-- they are taken from the merge in batches and their records' heads read
-- (taking more than get examined is harmless: the position returned is the last
-- one examined). A vanished record fails the check. A batch is sized from the share of
-- candidates that passed so far, to fetch about what the page still needs.
local check = check_type
local pending, ok, pi = {}, {}, 1
local found, misses, taken, passed = 0, 0, 0, 0

local function fill()
  local need = want - found + 1
  local rate = (passed + 1) / (taken + 1)
  local size = math.floor(need / rate * 1.25) + 8
  -- at most 512, and never more than this call can still examine
  size = math.min(size, 512, budget - misses + need)
  local ids = {}
  while #ids < size do
    local it, id = next_candidate()
    if not it then break end
    it.i = it.i + 1
    ids[#ids + 1] = id
  end
  pending, ok, pi = ids, {}, 1
  if #ids == 0 then return end
  for j = 1, #ids do
    local head = rcall('GETRANGE', prefix .. ids[j], 0, 99)
    if head ~= '' then
      local _, t = rec_head(head)
      ok[j] = t == want_type
    else
      ok[j] = false
    end
  end
  taken = taken + #ids
  for j = 1, #ids do
    if ok[j] then passed = passed + 1 end
  end
end

-- peek: the next candidate and whether it passes; nil at the end.
local function peek()
  if not check then
    local it, id = next_candidate()
    return id, true, it
  end
  if pi > #pending then fill() end
  return pending[pi], ok[pi]
end

local function consume(it)
  if it then it.i = it.i + 1 else pi = pi + 1 end
end

local out = {0, 0, ''}
while true do
  local id, pass, it = peek()
  if not id then break end
  if has_cursor and id >= cid then
    -- listed already (same millisecond as the cursor, larger id). Not a miss: the
    -- position must stay at the cursor, and ties are few (one millisecond).
    consume(it)
  elseif not pass then
    consume(it)
    if found < want then out[3] = id end
    misses = misses + 1
    if misses >= budget then
      out[2] = 1
      break
    end
  else
    if found == want then
      out[2] = 1
      break
    end
    consume(it)
    found = found + 1
    out[#out + 1] = id
    out[3] = id
  end
end
return out

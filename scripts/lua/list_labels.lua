-- list_labels.lua: the ids of one page of a tenant's requests that carry every
-- label of a label_selector (docs/reference.md §16), newest first, with the
-- other filters of list.lua (status, type, time bounds, cursor). Same calls,
-- arguments and reply as list.lua but ARGV[7], and the same order: every
-- index entry's score is its id's own millisecond, so the merge compares ids.
-- Plan: per shard and status of the filter, the candidate indexes are the
-- label index of each term ("<ix prefix>l:<status letter>:<name>=<value>",
-- create.lua, transition.lua) and, with a type filter, the (status, type)
-- index. The smallest of them (ZCARD, O(1)) drives: it is read newest first,
-- and each of its ids is kept only when it is in every other candidate
-- (ZSCORE, O(1) each). One iterator per (shard, status), merged in a max-heap
-- by head id, as list.lua merges its indexes. Every id yielded matches every
-- filter: the page is exact. A driver with few matches among its entries
-- (an AND of two common labels that rarely meet) costs a walk of its entries
-- between matches: docs/listing.md, Labels.
-- KEYS[1] meta hash of the first shard named in ARGV[9..]
-- ARGV[1] status letters (all six without a status filter)
-- ARGV[2] type filter, or ""
-- ARGV[3] max score ("+inf", or the newest created_at ms still wanted)
-- ARGV[4] min score ("-inf", or the oldest)
-- ARGV[5] cursor id ("" on the first page): resume with ids below it
-- ARGV[6] want: ids to return (>= 1), of all the call's shards together
-- ARGV[7] the selector's terms, "name=value" joined by "," (at least one)
-- ARGV[8] now (unix ms), with KEYS[2..3]
-- ARGV[9 + 3i], ARGV[10 + 3i], ARGV[11 + 3i]: per shard of the call, its meta
--         hash, its index key prefix and its index-head summary prefix
--         (unused here; list.lua's layout)
-- KEYS[2] credential read-rate counter, KEYS[3] tenant rate counter: optional,
--         as in list.lua (rate_gate)
-- Constants: RL_READ_LIMIT, RL_READ_WINDOW, RL_TENANT_LIMIT, RL_TENANT_WINDOW.
-- Returns {code, more, last_id, id1, shard1, ...} as list.lua | {2} tenant
-- frozen | {"9" .. rate part} rate limited
--- @include "rcall"
--- @include "rate_gate"
--- @include "index_refill"
--- @include "heap_push"
--- @include "merge_page"
local maxs, mins = ARGV[3], ARGV[4]
local cid = ARGV[5]
local want = tonumber(ARGV[6])

local shards = {}
for i = 9, #ARGV, 3 do
  if rcall('HGET', ARGV[i], 'fz') == '1' then return {2} end
  shards[#shards + 1] = {prefix = ARGV[i + 1], n = #shards + 1}
end
local ok, rl = rate_gate(2, RL_READ_LIMIT, RL_READ_WINDOW, ARGV[8])
if not ok then return {'9' .. rl} end

local terms = {}
for t in string.gmatch(ARGV[7], '[^,]+') do terms[#terms + 1] = t end

-- an iterator reads its driver newest first in chunks that double, and skips
-- the ids missing from one of its checks
local function head(it)
  while true do
    local id = it.buf[it.i]
    if id then
      local keep = true
      for _, c in ipairs(it.checks) do
        if not rcall('ZSCORE', c, id) then
          keep = false
          break
        end
      end
      if keep then return id end
      it.i = it.i + 1
    else
      if it.eof then return nil end
      index_refill(it, maxs, mins)
    end
  end
end

local heap = {}
local its = {}
for _, sh in ipairs(shards) do
  for i = 1, #ARGV[1] do
    local st = string.sub(ARGV[1], i, i)
    local cands = {}
    for _, t in ipairs(terms) do cands[#cands + 1] = sh.prefix .. 'l:' .. st .. ':' .. t end
    if ARGV[2] ~= '' then cands[#cands + 1] = sh.prefix .. st .. ':' .. ARGV[2] end
    local best, bestn = 0, nil
    for j, k in ipairs(cands) do
      local n = rcall('ZCARD', k)
      if not bestn or n < bestn then best, bestn = j, n end
      if n == 0 then break end
    end
    if bestn > 0 then
      local checks = {}
      for j, k in ipairs(cands) do
        if j ~= best then checks[#checks + 1] = k end
      end
      its[#its + 1] = {key = cands[best], checks = checks, buf = {}, i = 1, off = 0, eof = false, n = sh.n}
    end
  end
end
-- each first read a fair share of the page, as list.lua's eager plan
local first = want + 1
if #its > 1 then first = math.floor(first / #its) + 2 end
for _, it in ipairs(its) do
  it.size = first
  heap_push(heap, it, head)
end

return merge_page(heap, head, function() end, want, cid, rl)

// The Lua scripts (SPEC §4). Each touches only keys of one hash tag. Loaded once per connection
// with SCRIPT LOAD and run by EVALSHA; NOSCRIPT (a restarted or flushed Redis) reloads them.
#pragma once

namespace rsc::store::scripts {

// KEYS[1] group state hash, KEYS[2] group mutex.
// ARGV: token, lockTtlMs, expectedRev, wantStateOnConflict (0/1), full (0/1),
//       nSet, field, value, ..., nDel, field, ...
// -> {"OK", newRev} | {"CONFLICT", rev[, HGETALL]} | {"LOCKED", rev}
// The lock check, the revision check, the write and (lockTtlMs > 0) taking or extending the lock
// are one atomic step, so a steady heartbeat costs one round trip.
inline constexpr const char* kCas = R"lua(
local token = ARGV[1]
local raw = redis.call('HGET', KEYS[1], 'rev')
local rev = 0
if raw then
  rev = tonumber(raw)
  if rev == nil then return redis.error_reply('CORRUPT rev field is not a number') end
end
if token ~= '' then
  local holder = redis.call('GET', KEYS[2])
  if holder and holder ~= token then return {'LOCKED', rev} end
end
if rev ~= tonumber(ARGV[3]) then
  if ARGV[4] == '1' and raw then return {'CONFLICT', rev, redis.call('HGETALL', KEYS[1])} end
  return {'CONFLICT', rev}
end
if ARGV[5] == '1' then redis.call('DEL', KEYS[1]) end
local i = 7
local nset = tonumber(ARGV[6])
local batch = {}
for k = 1, nset do
  batch[#batch + 1] = ARGV[i]
  batch[#batch + 1] = ARGV[i + 1]
  i = i + 2
  if #batch >= 400 then redis.call('HSET', KEYS[1], unpack(batch)); batch = {} end
end
-- The new revision goes out with the last fields (one HSET for a steady heartbeat's write).
batch[#batch + 1] = 'rev'
batch[#batch + 1] = rev + 1
redis.call('HSET', KEYS[1], unpack(batch))
local ndel = tonumber(ARGV[i])
i = i + 1
batch = {}
for k = 1, ndel do
  batch[#batch + 1] = ARGV[i]
  i = i + 1
  if #batch >= 400 then redis.call('HDEL', KEYS[1], unpack(batch)); batch = {} end
end
if #batch > 0 then redis.call('HDEL', KEYS[1], unpack(batch)) end
if token ~= '' and tonumber(ARGV[2]) > 0 then redis.call('SET', KEYS[2], token, 'PX', tonumber(ARGV[2])) end
return {'OK', rev + 1}
)lua";

// KEYS[1] mutex; ARGV[1] token. Deletes only our own lock.
inline constexpr const char* kUnlock = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

// Generic steps for a hash whose rules live in the core (a stream's metadata: group::put_step,
// group::scale_step): read it with the server's clock, decide in C++, write it back only if what
// was decided on is still there.

// KEYS[1] a hash; ARGV the fields to read. -> {seconds, microseconds, {values (false: absent)}}
// (TIME from the node that holds the key).
inline constexpr const char* kReadHashWithTime = R"lua(
local t = redis.call('TIME')
return {t[1], t[2], redis.call('HMGET', KEYS[1], unpack(ARGV))}
)lua";

// KEYS[1] a hash. ARGV[1] n, then n pairs (field, '=' .. value as read | '!' when absent): what the
// caller decided on; then m and m pairs (field, value) to set; then the fields to delete. Writes
// only if every one of the n fields is still as read. -> 1 written | 0 stale (decide again)
inline constexpr const char* kHashCas = R"lua(
local n = tonumber(ARGV[1])
for i = 0, n - 1 do
  local have = redis.call('HGET', KEYS[1], ARGV[2 + 2 * i])
  local want = ARGV[3 + 2 * i]
  if want == '!' then
    if have then return 0 end
  elseif not have or '=' .. have ~= want then
    return 0
  end
end
local at = 2 + 2 * n
local m = tonumber(ARGV[at])
if m > 0 then
  local set = {}
  for i = 1, 2 * m do set[i] = ARGV[at + i] end
  redis.call('HSET', KEYS[1], unpack(set))
end
local dels = {}
for i = at + 2 * m + 1, #ARGV do dels[#dels + 1] = ARGV[i] end
if #dels > 0 then redis.call('HDEL', KEYS[1], unpack(dels)) end
return 1
)lua";

// KEYS[1] group state hash, KEYS[2] group mutex; ARGV token, ttl ms, known revision.
// Takes the mutex for deadline work (or extends it when it is ours already).
// -> {"LOCKED"} | {"SAME", rev} | {"CHANGED", rev, HGETALL}
inline constexpr const char* kTickLease = R"lua(
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {'LOCKED'} end
redis.call('SET', KEYS[2], ARGV[1], 'PX', tonumber(ARGV[2]))
local raw = redis.call('HGET', KEYS[1], 'rev')
local rev = 0
if raw then rev = tonumber(raw) or -1 end
if rev == tonumber(ARGV[3]) then return {'SAME', rev} end
return {'CHANGED', rev, redis.call('HGETALL', KEYS[1])}
)lua";

// KEYS[1] deadline index (zset group -> due ms), KEYS[2] the revisions it reflects (hash).
// ARGV group, due ('' = none), revision, mode.
// mode 'lower': due = min(current, ARGV[2]) and the revision is raised; always applied (an earlier
// deadline is always safe). mode 'set': applied unless the index reflects a newer revision.
// -> 1 applied | 0 not (newer revision there)
inline constexpr const char* kSetDeadline = R"lua(
local g = ARGV[1]
local rev = tonumber(ARGV[3])
local seen = tonumber(redis.call('HGET', KEYS[2], g) or '-1')
if ARGV[4] == 'lower' then
  local cur = redis.call('ZSCORE', KEYS[1], g)
  if (not cur) or tonumber(ARGV[2]) < tonumber(cur) then redis.call('ZADD', KEYS[1], ARGV[2], g) end
  if rev > seen then redis.call('HSET', KEYS[2], g, rev) end
  return 1
end
if seen > rev then return 0 end
if ARGV[2] == '' then
  redis.call('ZREM', KEYS[1], g)
  redis.call('HDEL', KEYS[2], g)
else
  redis.call('ZADD', KEYS[1], ARGV[2], g)
  redis.call('HSET', KEYS[2], g, rev)
end
return 1
)lua";

// KEYS[1] pod registry (zset pod -> lease end), KEYS[2] deadline index, KEYS[3] registrations
// (hash pod -> "SINCE|ADDRESS": the store time its registration counts from, minus its
// registration time when no other pod was live then, and where it takes forwarded calls).
// ARGV pod id ('' = only read), lease ms, due limit, address ('' = unchanged). The store's clock
// decides: leases and deadlines are on it. Six commands a beat; more only when a pod registers,
// changes its address or ran out.
// -> {now_ms, {live pods}, {due groups}, {since of each live pod}, {address of each live pod}}
inline constexpr const char* kPodBeat = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) > 0 then
  for _, p in ipairs(redis.call('HKEYS', KEYS[3])) do
    if not redis.call('ZSCORE', KEYS[1], p) then redis.call('HDEL', KEYS[3], p) end
  end
end
if ARGV[1] ~= '' then
  if redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) == 1 then
    local since = now
    if redis.call('ZCARD', KEYS[1]) == 1 then since = -now end
    redis.call('HSET', KEYS[3], ARGV[1], since .. '|' .. ARGV[4])
  elseif ARGV[4] ~= '' then
    local cur = redis.call('HGET', KEYS[3], ARGV[1])
    local since = (cur and tonumber(string.match(cur, '^(-?%d+)'))) or 0
    redis.call('HSET', KEYS[3], ARGV[1], since .. '|' .. ARGV[4])
  end
end
local pods = redis.call('ZRANGE', KEYS[1], 0, -1)
local since, addr = {}, {}
if #pods > 0 then
  local info = redis.call('HMGET', KEYS[3], unpack(pods))
  for i = 1, #pods do
    -- A pod with no entry (registered by an older version) counts as established.
    local v = info[i] or ''
    since[i] = tonumber(string.match(v, '^(-?%d+)')) or 0
    addr[i] = string.match(v, '|(.*)$') or ''
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
return {now, pods, due, since, addr}
)lua";

// KEYS[1] group state hash, KEYS[2] group mutex, KEYS[3] its dead-letter stream; ARGV expected
// revision, grants held until (ms, 0: none). The state goes with its dead letters, its revision stays (it must never go back for pods that remember it), and
// so does the time before which a group created again under the name hands out no shard.
// -> {"DELETED", rev} | {"CONFLICT", rev} | {"NOTFOUND", rev}
inline constexpr const char* kDeleteGroup = R"lua(
local raw = redis.call('HGET', KEYS[1], 'rev')
local rev = tonumber(raw or '0') or 0
if redis.call('HEXISTS', KEYS[1], 'g') == 0 then return {'NOTFOUND', rev} end
if rev ~= tonumber(ARGV[1]) then return {'CONFLICT', rev} end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'rev', rev + 1)
if tonumber(ARGV[2]) > 0 then redis.call('HSET', KEYS[1], 'dg', ARGV[2]) end
return {'DELETED', rev + 1}
)lua";

// KEYS[1] group state hash; ARGV[1] expected revision. Moves the revision on by one, nothing else,
// if it is the expected one: a write of the group that is not in its state (an offset reset).
// -> {"OK", rev} | {"CONFLICT", rev}
inline constexpr const char* kBumpRevision = R"lua(
local rev = tonumber(redis.call('HGET', KEYS[1], 'rev') or '0') or 0
if rev ~= tonumber(ARGV[1]) then return {'CONFLICT', rev} end
redis.call('HSET', KEYS[1], 'rev', rev + 1)
return {'OK', rev + 1}
)lua";

// KEYS[1] stream metadata hash; ARGV[1] the encoded retention policy. 0: no such stream.
inline constexpr const char* kSetRetention = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'retention', ARGV[1])
return 1
)lua";

// KEYS[1] one shard stream, KEYS[2] its trimmed-unread hash (protocol::trimmed_unread_key: each
// group's count is added there, for the lag, and the shard's total under '*trimmed', a field no
// group name can take); ARGV[1] 'maxlen' | 'minid' | 'processed', ARGV[2] its bound, ARGV[3]
// the most records to trim now (the rest waits for the next round: a script blocks Redis).
// maxlen and minid walk the records to drop from the head (pages of 1000) and count, per consumer
// group, those after its last delivered id, then trim exactly up to the first record kept: the
// count is exact whatever Redis's own lag says (it still counts records trimmed unread). processed
// trims (~, whole nodes) below the lowest id some group has pending, else the one after its last
// delivered id; a shard without groups is kept; nothing is unread by construction.
// Two keys of one slot: atomic with the reading, and fine on a Redis Cluster.
// -> {trimmed, group, unread, group, unread, ...}
inline constexpr const char* kTrim = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
local function get(g, f)
  for i = 1, #g, 2 do if g[i] == f then return g[i + 1] end end
  return nil
end
local function split(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq), ms
end
local function less(a, b)
  local am, as = split(a)
  local bm, bs = split(b)
  return am < bm or (am == bm and as < bs)
end
local cap = tonumber(ARGV[3])
if ARGV[1] == 'processed' then
  if #groups == 0 then return {0} end
  local bound = nil
  for _, g in ipairs(groups) do
    local keep = redis.call('XPENDING', KEYS[1], get(g, 'name'))[2]
    if not keep then
      local _, seq, ms = split(get(g, 'last-delivered-id'))
      keep = ms .. '-' .. string.format('%.0f', seq + 1)
    end
    if bound == nil or less(keep, bound) then bound = keep end
  end
  local n = redis.call('XTRIM', KEYS[1], 'MINID', '~', bound, 'LIMIT', cap)
  if n > 0 then redis.call('HINCRBY', KEYS[2], '*trimmed', n) end
  return {n}
end
local want = cap
if ARGV[1] == 'maxlen' then want = math.min(cap, math.max(0, redis.call('XLEN', KEYS[1]) - tonumber(ARGV[2]))) end
local last = ARGV[1] == 'minid' and ('(' .. ARGV[2]) or '+'
-- The groups by position; each one's count of dropped records at or before it (read).
local pos = {}
for _, g in ipairs(groups) do pos[#pos + 1] = {get(g, 'name'), get(g, 'last-delivered-id'), 0} end
table.sort(pos, function(a, b) return less(a[2], b[2]) end)
local p, dropped, start = 1, 0, '-'
while dropped < want do
  local page = redis.call('XRANGE', KEYS[1], start, last, 'COUNT', math.min(1000, want - dropped))
  for _, e in ipairs(page) do
    while p <= #pos and less(pos[p][2], e[1]) do
      pos[p][3] = dropped
      p = p + 1
    end
    dropped = dropped + 1
  end
  if #page == 0 then break end
  start = '(' .. page[#page][1]
  if #page < 1000 then break end
end
if dropped == 0 then return {0} end
for i = p, #pos do pos[i][3] = dropped end
local kept = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 1)
local trimmed
if #kept == 0 then
  trimmed = redis.call('XTRIM', KEYS[1], 'MAXLEN', 0)
else
  trimmed = redis.call('XTRIM', KEYS[1], 'MINID', kept[1][1])
end
if trimmed > 0 then redis.call('HINCRBY', KEYS[2], '*trimmed', trimmed) end
local out = {trimmed}
for _, g in ipairs(pos) do
  out[#out + 1] = g[1]
  out[#out + 1] = dropped - g[3]
  if dropped > g[3] then redis.call('HINCRBY', KEYS[2], g[1], dropped - g[3]) end
end
return out
)lua";

}  // namespace rsc::store::scripts

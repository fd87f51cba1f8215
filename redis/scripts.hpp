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

// KEYS[1] stream metadata hash; ARGV[1] shard count, ARGV[2] key style ('' = the stream's, or
// plain for a new one), ARGV[3] 'create' (leave an existing stream alone) or 'put'. Create or
// grow, never shrink; the key style is set once. A stream without one predates the choice and
// uses hash-tagged keys.
// Growth is refused while a shrink drains (BUSY) or retired shard streams are being deleted
// (DELETING), and puts retired shard streams below the new count back in use.
// -> {"CREATED"|"GROWN"|"SAME"|"EXISTS"|"SHRINK"|"STYLE"|"BUSY"|"DELETING", shardCount, metadataVersion, keyStyle}
inline constexpr const char* kPutStream = R"lua(
local n = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'shardCount', 'metadataVersion', 'keyStyle', 'migState', 'rkTo', 'rkDel')
if cur[1] then
  local c = tonumber(cur[1])
  local v = tonumber(cur[2])
  local style = cur[3] or 'hashtag'
  if ARGV[3] == 'create' then return {'EXISTS', c, v, style} end
  if ARGV[2] ~= '' and ARGV[2] ~= style then return {'STYLE', c, v, style} end
  if n < c then return {'SHRINK', c, v, style} end
  if n > c and cur[4] == 'DRAINING' then return {'BUSY', c, v, style} end
  if n > c and cur[6] == '1' then return {'DELETING', c, v, style} end
  if n == c then return {'SAME', c, v, style} end
  redis.call('HSET', KEYS[1], 'shardCount', n, 'metadataVersion', v + 1)
  if tonumber(cur[5] or '0') <= n then redis.call('HDEL', KEYS[1], 'rkTo', 'rkAt') end
  return {'GROWN', n, v + 1, style}
end
local style = ARGV[2]
if style == '' then style = 'plain' end
redis.call('HSET', KEYS[1], 'shardCount', n, 'metadataVersion', 1, 'keyStyle', style)
return {'CREATED', n, 1, style}
)lua";

// KEYS[1] stream metadata hash; ARGV[1] 'scale' | 'rollback' | 'retire' | 'delete retired' |
// 'retired deleted', ARGV[2] the target count (scale) or the expected metadataVersion (retire,
// delete retired), ARGV[3] requestedBy, ARGV[4] reason. group::scale_step's rules, atomically; the
// migration in fields mig*, the retired shard streams in rk* (rkTo, rkAt, rkDel), times from Redis's
// clock.
// -> {outcome} with outcome as group::to_string(ScaleOutcome) spells it, or {'NOSTREAM'}
inline constexpr const char* kScaleStream = R"lua(
local cur = redis.call('HMGET', KEYS[1], 'shardCount', 'metadataVersion', 'migState', 'migFrom', 'rkTo', 'rkDel')
if not cur[1] then return {'NOSTREAM'} end
local c = tonumber(cur[1])
local v = tonumber(cur[2])
local from = tonumber(cur[4] or '0')
local draining = cur[3] == 'DRAINING' and from > c
local rkTo = tonumber(cur[5] or '0')
local deleting = cur[6] == '1'
local read = c
if draining then read = from end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
if op == 'scale' then
  local n = tonumber(ARGV[2])
  if draining or deleting then return {'busy'} end
  if n == c then return {'same'} end
  local state = 'DEPRECATED'
  if n < c then state = 'DRAINING' end
  redis.call('HSET', KEYS[1], 'shardCount', n, 'metadataVersion', v + 1, 'migId', 'v' .. (v + 1), 'migFrom', c,
             'migTo', n, 'migState', state, 'migCreated', now, 'migUpdated', now, 'migBy', ARGV[3], 'migReason', ARGV[4])
  if n < c then return {'draining'} end
  if rkTo <= n then redis.call('HDEL', KEYS[1], 'rkTo', 'rkAt') end
  return {'grown'}
elseif op == 'rollback' then
  if not draining then return {'nothing to roll back'} end
  redis.call('HSET', KEYS[1], 'shardCount', from, 'metadataVersion', v + 1, 'migState', 'ROLLED_BACK', 'migUpdated', now)
  return {'rolled back'}
elseif op == 'delete retired' then
  if draining or deleting or rkTo <= read or v ~= tonumber(ARGV[2]) then return {'stale'} end
  redis.call('HSET', KEYS[1], 'rkDel', '1')
  return {'deleting'}
elseif op == 'retired deleted' then
  if not deleting then return {'stale'} end
  redis.call('HDEL', KEYS[1], 'rkDel', 'rkTo', 'rkAt')
  return {'keys deleted'}
end
if not draining or v ~= tonumber(ARGV[2]) then return {'stale'} end
if from > rkTo then rkTo = from end
redis.call('HSET', KEYS[1], 'metadataVersion', v + 1, 'migState', 'DEPRECATED', 'migUpdated', now, 'rkTo', rkTo, 'rkAt', now)
return {'retired'}
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

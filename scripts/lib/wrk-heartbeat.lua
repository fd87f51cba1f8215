-- wrk script: steady heartbeats of members that joined beforehand (scripts/wrk-heartbeats.sh
-- writes their ids, epochs and shards to the file named by RSC_WRK_MEMBERS, one member a line:
-- "stream group member epoch shard,shard,..."). Each request is the next member's heartbeat with a
-- requestId of its own (a repeated one would be answered from the member's stored answer).
-- RSC_WRK_PROGRESS shapes it as the member runtime sends it (as rsc-load's --progress does):
-- `none` (the default) sends the lease and the owned shards only; `still` adds `revokingShards` and
-- a `shardProgress` entry per owned shard whose lastDeliveredId stays put (an idle consumer);
-- `moving` makes that id new in every heartbeat (records flowing: every heartbeat changes what the
-- coordinator stores).
local members = {}
local counter = 0
local thread_id = 0
local threads = {}
local progress = os.getenv("RSC_WRK_PROGRESS") or "none"
not_ok = 0  -- answers whose status is not OK (FENCED, UNKNOWN_MEMBER, RETRY, ...): counted by done()

function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
  threads[#threads + 1] = thread
end

-- The revokingShards and shardProgress that follow the requestId (none when RSC_WRK_PROGRESS is
-- none), made once per member: the constant text between the places where a shard's
-- lastDeliveredId goes, so that a request joins them around its id in one table.concat.
local function progress_pieces(held)
  if progress == "none" then return {""} end
  local pieces = {',"revokingShards":[],"shardProgress":['}
  for i, s in ipairs(held) do
    pieces[#pieces] = pieces[#pieces] .. (i > 1 and "," or "") .. '{"shardIndex":' .. s .. ',"lastDeliveredId":"'
    pieces[#pieces + 1] = '","pending":0,"lag":0}'
  end
  pieces[#pieces] = pieces[#pieces] .. "]"
  if progress == "still" then return {table.concat(pieces, "1700000000000-0")} end
  return pieces
end

function init(args)
  local path = os.getenv("RSC_WRK_MEMBERS")
  for line in io.lines(path) do
    local stream, group, member, epoch, shards = line:match("^(%S+) (%S+) (%S+) (%S+) ?(%S*)$")
    if member then
      local owned, held = {}, {}
      for s in shards:gmatch("%d+") do
        owned[#owned + 1] = '{"shardIndex":' .. s .. ',"state":"OWNED"}'
        held[#held + 1] = s
      end
      members[#members + 1] = {
        progress = progress_pieces(held),
        path = "/coord/v1/streams/" .. stream .. "/groups/" .. group .. "/members/" .. member .. "/heartbeat",
        head = '{"protocolVersion":1,"memberId":"' .. member .. '","memberEpoch":' .. epoch ..
               ',"metadataVersion":1,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":4,"availableConcurrency":4},' ..
               '"ownedShards":[' .. table.concat(owned, ",") .. '],"requestId":"wrk-',
      }
    end
  end
  counter = (tid or 0) * 1000000000
end

-- A moving member's progress takes this request's id; the others' is made already.
local function progress_of(m)
  local p = m.progress
  if p[2] then return table.concat(p, "1700000000000-" .. counter) end
  return p[1]
end

function request()
  counter = counter + 1
  local m = members[(counter % #members) + 1]
  return wrk.format("POST", m.path, {["Content-Type"] = "application/json"}, m.head .. counter .. '"' .. progress_of(m) .. '}')
end

function response(status, headers, body)
  if status ~= 200 or not body:find('"status":"OK"', 1, true) then not_ok = not_ok + 1 end
end

function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do n = n + t:get("not_ok") end
  io.write(string.format("answers not OK: %d\n", n))
end

// Redis key names (SPEC §4). Every key of one group shares the hash tag {<prefix>/<group>}, so the
// CAS script's keys sit in one Redis Cluster slot; shard streams default to {<prefix>:<shard>}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "redis/result.hpp"

namespace rsc::store {

struct KeySpace {
  std::string ns = "rsc";
  // $prefix and $shard are replaced; braces mark the Cluster hash tag.
  std::string shardStreamPattern = "{$prefix:$shard}";

  std::string group_tag(const GroupKey& k) const { return "{" + k.streamPrefix + "/" + k.consumerGroup + "}"; }
  std::string group_state(const GroupKey& k) const { return ns + ":" + group_tag(k) + ":state"; }
  std::string group_lock(const GroupKey& k) const { return ns + ":" + group_tag(k) + ":lock"; }
  // The group's sharded pub/sub channel: members hear of changes here (same slot as its keys).
  std::string notify_channel(const GroupKey& k) const { return ns + ":" + group_tag(k) + ":changes"; }
  // The group's dead-letter stream (written by its members, read by the coordinator and rsc-admin).
  std::string dead_letters(const GroupKey& k) const { return ns + ":" + group_tag(k) + ":dead"; }
  // The pod registry and the deadline index share one hash tag: one slot, one node in a cluster.
  std::string pods() const { return ns + ":{coord}:pods"; }
  std::string deadlines() const { return ns + ":{coord}:due"; }
  // Each live pod's registration: when it counts from and where it takes forwarded calls.
  std::string pods_info() const { return ns + ":{coord}:podinfo"; }
  std::string deadline_revisions() const { return ns + ":{coord}:duerev"; }
  std::string group_index() const { return ns + ":groups"; }
  std::string stream_meta(const std::string& prefix) const { return ns + ":stream:{" + prefix + "}"; }
  std::string stream_groups(const std::string& prefix) const { return ns + ":stream:{" + prefix + "}:groups"; }
  // The lag snapshot (group/stream_lag.hpp): positions and shards' figures, and the groups' sums.
  std::string lag_snapshot(const std::string& prefix) const { return ns + ":stream:{" + prefix + "}:lag"; }
  std::string lag_sums(const std::string& prefix) const { return ns + ":stream:{" + prefix + "}:lagsum"; }
  std::string shard_stream(const std::string& prefix, int32_t shard) const;
};

// Redis Cluster's CRC16 (XMODEM) and key slot, honouring the first non-empty {...} hash tag.
uint16_t crc16(std::string_view data);
int key_slot(std::string_view key);

}  // namespace rsc::store

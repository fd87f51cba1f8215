// A stream's shard racks worked out from where its shards live: each shard gets the zone of the
// Redis node that serves its key (a Cluster's master for the key's slot). Which node serves which
// shard is the store's to say; the zone of each node is the coordinator's configuration
// (--redis-node-zones). Pure: no I/O.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::group {

// Node "host:port" -> zone.
using NodeZones = std::map<std::string, std::string>;

// "10.0.0.1:6379=eu-1a,10.0.0.2:6379=eu-1b" (spaces around items are ignored; "" is none).
// `error` names the first bad item; nothing is taken from a text with one.
struct ParsedNodeZones {
  NodeZones zones;
  std::string error;
};
ParsedNodeZones parse_node_zones(std::string_view text);

// The rack of each shard from the node serving it. `refusal` (and no racks) when the coordinator
// knows no zones at all or some shard's node has none: a half-known layout would look local where
// it is not, so it is not taken.
struct RacksFromZones {
  std::vector<std::string> racks;
  std::string refusal;
};
RacksFromZones racks_from_zones(const std::vector<std::string>& shardNodes, const NodeZones& zones);

}  // namespace rsc::group

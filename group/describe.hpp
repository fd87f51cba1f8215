// The describe view of a group (GET .../groups/{group}), as JSON text.
#pragma once

#include <map>
#include <string>

#include "group/recent_events.hpp"
#include "group/state.hpp"
#include "group/stream_lag.hpp"

namespace rsc::group {

// Where the group's shards are read relative to their racks: per live member, how many of the
// shards it reads now are in its own rack, and how many shards in all are read from another rack
// (or by a member, or of a shard, with no rack). Only meaningful when the group has shard racks.
struct RackLocality {
  std::map<std::string, int32_t> inRack;
  int32_t crossRack = 0;
};
RackLocality rack_locality(const GroupState& g);
// rack_locality(g).crossRack without the per-member map (for the metric, at every write).
int32_t cross_rack_shards(const GroupState& g);

// With `recent`, the answer carries "recentEvents" (oldest first), each with its age. With
// `redis`, each shard carries "redis" (the group's position there as Redis reports it: lag null
// when Redis cannot tell) and the group "redisLag" (the sums; "records" null unless every shard's
// lag is known).
// `stream`: the stream's metadata, for each shard's phase in a change of its shard count.
// `age`: where the Redis figures come from ("redisLagSource": live or lag-round) and, for the
// snapshot, when they were read ("redisLagReadAt", "redisLagAgeMs"; null before the first round).
std::string describe_json(const GroupState& g, Millis now, const RecentEvents* recent = nullptr,
                          const GroupLag* redis = nullptr, const protocol::StreamMetadata* stream = nullptr,
                          const LagReadingAge* age = nullptr);

}  // namespace rsc::group

#include "group/co_partition.hpp"

namespace rsc::group {

std::optional<std::string> link_refusal(const protocol::GroupKey& self, const protocol::GroupKey& with,
                                        const std::optional<protocol::StreamMetadata>& own,
                                        const std::optional<protocol::StreamMetadata>& other) {
  if (self.streamPrefix == with.streamPrefix)
    return "coPartitionedWith: " + with.str() + " reads the same stream as " + self.str() +
           "; co-partitioning pairs groups of two streams";
  if (!own) return "coPartitionedWith: stream " + self.streamPrefix + " does not exist; create it first";
  if (!other) return "coPartitionedWith: stream " + with.streamPrefix + " does not exist; create it first";
  for (const auto* m : {&*own, &*other})
    if (m->drainingShards() > 0)
      return "coPartitionedWith: stream " + m->streamPrefix + " is shrinking (" + std::to_string(m->drainingShards()) +
             " shard(s) still draining); link it once the shrink is done";
  if (own->shardCount != other->shardCount)
    return "coPartitionedWith: stream " + self.streamPrefix + " has " + std::to_string(own->shardCount) + " shards and " +
           with.streamPrefix + " has " + std::to_string(other->shardCount) +
           "; co-partitioned streams need as many (scale one to the other's count first)";
  return std::nullopt;
}

std::optional<std::string> link_outdated(const GroupState& g, const protocol::GroupConfig& c, std::optional<int32_t> checkedShardCount) {
  if (!c.coPartitionedWith || !checkedShardCount || g.shardCount == *checkedShardCount) return std::nullopt;
  return "coPartitionedWith: stream " + g.streamPrefix + " went from " + std::to_string(*checkedShardCount) + " to " +
         std::to_string(g.shardCount) + " shards while the link was being made; nothing was linked";
}

PartnerView partner_view(const Loaded& other, const protocol::GroupKey& self) {
  PartnerView v;
  if (other.exists && other.state.assignor == protocol::AssignorKind::CoPartitioned) v.names = other.state.coPartitionedWith;
  v.linksBack = v.names && *v.names == self;
  return v;
}

std::optional<std::string> partner_refusal(const PartnerView& seen, const protocol::GroupKey& self, const protocol::GroupKey& with) {
  if (!seen.names || *seen.names == self) return std::nullopt;
  return "coPartitionedWith: " + with.str() + " is co-partitioned with " + seen.names->str() +
         "; that link is left alone and nothing was changed (set another assignor on " + with.str() + " first)";
}

std::optional<std::string> scale_refusal(const std::string& prefix, const std::vector<Loaded>& groups) {
  for (const auto& g : groups) {
    if (!g.exists || g.state.assignor != protocol::AssignorKind::CoPartitioned || !g.state.coPartitionedWith) continue;
    return "stream " + prefix + ": group " + g.state.consumerGroup + " is co-partitioned with " + g.state.coPartitionedWith->str() +
           "; the shard count stays while the link stands (set that group's assignor to another one, on both "
           "streams, scale both, then link them again)";
  }
  return std::nullopt;
}

}  // namespace rsc::group

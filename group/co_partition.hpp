// Co-partitioned groups: when two groups of two streams may be linked (the co-partitioned
// assignor: shard i of both goes to one member), and what the link forbids while it stands. Pure:
// the callers read the streams and groups, these rules decide.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "group/state.hpp"
#include "protocol/types.hpp"

namespace rsc::group {

// Why `self` may not be linked with `with` now, or nullopt: not with itself nor another group of its
// own stream, both streams must exist with as many shards and neither may be shrinking (a draining
// shrink still reads shards past its new count).
std::optional<std::string> link_refusal(const protocol::GroupKey& self, const protocol::GroupKey& with,
                                        const std::optional<protocol::StreamMetadata>& own,
                                        const std::optional<protocol::StreamMetadata>& other);

// Why a link checked at `checkedShardCount` shards may not be written on `g` now, or nullopt: the
// group's stream changed its shard count since the check (a scale that landed in between; once the
// link is written, apply_metadata ends it instead).
std::optional<std::string> link_outdated(const GroupState& g, const protocol::GroupConfig& c, std::optional<int32_t> checkedShardCount);

// What the other group of a link says: whom it is co-partitioned with (nullopt: nobody, or it is
// not co-partitioned), and whether that is `self` (the link is whole).
struct PartnerView {
  std::optional<protocol::GroupKey> names;
  bool linksBack = false;
};
PartnerView partner_view(const Loaded& other, const protocol::GroupKey& self);
// Why `self` may not be linked with `with`, whose view is `seen`, or nullopt: `with` is linked with
// a third group, and that link is left alone (taking it over would break it; linking one side
// would leave `self` linked alone, its stream frozen). Checked before anything is written.
std::optional<std::string> partner_refusal(const PartnerView& seen, const protocol::GroupKey& self, const protocol::GroupKey& with);

// Why the shard count of stream `prefix` may not change, or nullopt: one of its groups (as read
// from the store) is co-partitioned with a group of another stream, whose shard i would no longer
// sit beside its own.
std::optional<std::string> scale_refusal(const std::string& prefix, const std::vector<Loaded>& groups);

}  // namespace rsc::group

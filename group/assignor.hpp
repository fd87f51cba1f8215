// The assignors: pure, stateless, deterministic and independent of the order members are given in.
// Whatever they return, the core's rules (revoke before assign, epochs, leases) carry it out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "group/shard_set.hpp"

namespace rsc::group {

struct AssignmentSpec {
  std::vector<std::string> members;         // any order, no duplicates
  int32_t shardCount = 0;                   // shards are 0..shardCount-1
  std::map<std::string, ShardSet> current;  // previous target, the stickiness input; may be stale
};

// Every shard to exactly one member; member counts differ by at most one; a member keeps its
// current shards up to its quota; a balanced input comes back unchanged. Members that hold more
// shards keep the larger quota, so one join or leave moves only what the balance needs.
std::map<std::string, ShardSet> assign_uniform_sticky(const AssignmentSpec& spec);

// Contiguous blocks of shard indices in member-id order (as Kafka's range assignor): counts differ by
// at most one. Which members get the one more is chosen to keep the most of what members hold now
// (with no current input: the first ones), so a block moves only where the boundaries must.
std::map<std::string, ShardSet> assign_range(const AssignmentSpec& spec);

// Co-partitioned: range's contiguous blocks as a function of the members alone, no stickiness: the
// members in the order of `order` (a member's instance id if it has one, else its id; ties by id),
// the first shardCount % n of them one shard more. Two groups with the same members and as many
// shards get the same split, so shard i of both streams goes to one member without either group
// reading the other's state. `order`: member id -> its sort key (missing: its id).
std::map<std::string, ShardSet> assign_co_partitioned(const AssignmentSpec& spec,
                                                      const std::map<std::string, std::string>& order);

// Racks (zones) of members and shards: "" (or a shard past the list) is none, matching nothing.
struct Racks {
  std::map<std::string, std::string> member;  // member id -> rack
  std::vector<std::string> shard;             // shard index -> rack
  const std::string& of_member(const std::string& id) const;
  const std::string& of_shard(int32_t s) const;
};

// Rack aware: the uniform assignor's balance (counts differ by at most one) and, within it, as
// many shards as can be read from a member of their own rack (the fewest shards read across racks
// that any balanced assignment allows), keeping current shards where that costs no locality.
std::map<std::string, ShardSet> assign_rack_aware(const AssignmentSpec& spec, const Racks& racks);

// How many shards a target has read by a member of another rack (or where either has none).
int32_t cross_rack_shards(const std::map<std::string, ShardSet>& target, const Racks& racks);

}  // namespace rsc::group

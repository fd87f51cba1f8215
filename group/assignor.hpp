// The uniform sticky assignor (SPEC §3 rule 4): stateless, deterministic, order independent.
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

}  // namespace rsc::group

// A stream entry as the member's handler sees it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rsc::member {

struct Record {
  int32_t shard = 0;
  std::string id;  // the stream entry id
  std::vector<std::pair<std::string, std::string>> fields;
  // How many times Redis has delivered it to this group, this delivery included (1: the first;
  // a failed attempt, a crash or a handover before its ack add one each).
  int64_t deliveries = 1;
  std::string field(const std::string& name) const;
};

}  // namespace rsc::member

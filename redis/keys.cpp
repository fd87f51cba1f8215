#include "redis/keys.hpp"

#include "protocol/partition.hpp"

namespace rsc::store {

std::string KeySpace::shard_stream(const std::string& prefix, int32_t shard) const {
  std::string out;
  const std::string_view p = shardStreamPattern;
  for (std::size_t i = 0; i < p.size();) {
    if (p.compare(i, 7, "$prefix") == 0) {
      out += prefix;
      i += 7;
    } else if (p.compare(i, 6, "$shard") == 0) {
      out += std::to_string(shard);
      i += 6;
    } else {
      out += p[i++];
    }
  }
  return out;
}

uint16_t crc16(std::string_view data) { return protocol::redis_crc16(data); }
int key_slot(std::string_view key) { return protocol::redis_key_slot(key); }

}  // namespace rsc::store

#include "redis/keys.hpp"

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

uint16_t crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

int key_slot(std::string_view key) {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & 16383;
}

}  // namespace rsc::store

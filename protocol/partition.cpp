#include "protocol/partition.hpp"

#include <cstring>

namespace rsc::protocol {

namespace {
constexpr uint32_t kC1 = 0xcc9e2d51u, kC2 = 0x1b873593u;
uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
uint32_t scramble(uint32_t k) { return rotl(k * kC1, 15) * kC2; }
}  // namespace

uint32_t murmur3_32(std::string_view data, uint32_t seed) {
  uint32_t h = seed;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t blocks = data.size() / 4;
  for (std::size_t i = 0; i < blocks; ++i) {
    const uint32_t k = static_cast<uint32_t>(p[4 * i]) | static_cast<uint32_t>(p[4 * i + 1]) << 8 |
                       static_cast<uint32_t>(p[4 * i + 2]) << 16 | static_cast<uint32_t>(p[4 * i + 3]) << 24;
    h ^= scramble(k);
    h = rotl(h, 13) * 5 + 0xe6546b64u;
  }
  uint32_t tail = 0;
  switch (data.size() & 3) {
    case 3: tail ^= static_cast<uint32_t>(p[4 * blocks + 2]) << 16; [[fallthrough]];
    case 2: tail ^= static_cast<uint32_t>(p[4 * blocks + 1]) << 8; [[fallthrough]];
    case 1:
      tail ^= p[4 * blocks];
      h ^= scramble(tail);
  }
  h ^= static_cast<uint32_t>(data.size());
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

uint32_t fnv1a_32(std::string_view data) {
  uint32_t h = 2166136261u;
  for (unsigned char c : data) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

uint32_t murmur3_unbiased_shard(std::string_view key, uint32_t shardCount) {
  if (shardCount == 0) return 0;  // no shard to pick; callers check the count
  const uint64_t space = uint64_t{1} << 32;
  const uint64_t limit = space - space % shardCount;  // hashes below it map evenly
  uint32_t h = murmur3_32(key, 0);
  for (uint32_t attempt = 1; h >= limit; ++attempt) {
    const unsigned char le[4] = {static_cast<unsigned char>(attempt), static_cast<unsigned char>(attempt >> 8),
                                 static_cast<unsigned char>(attempt >> 16), static_cast<unsigned char>(attempt >> 24)};
    h = murmur3_32(key, murmur3_32(std::string_view(reinterpret_cast<const char*>(le), 4), 0));
  }
  return h % shardCount;
}

uint32_t fnv1a_shard(std::string_view key, uint32_t shardCount) {
  return shardCount == 0 ? 0 : fnv1a_32(key) % shardCount;
}

uint16_t redis_crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc ^= static_cast<uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

int redis_key_slot(std::string_view key) {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return redis_crc16(key) & 16383;
}

}  // namespace rsc::protocol

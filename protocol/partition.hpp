// How a producer maps a record key to a shard. The default is what the reference clients do, so
// producers of either kind put one key on one shard: MurmurHash3 x86 32-bit of the key's bytes
// with seed 0, made unbiased by rejection (a hash at or above the largest multiple of the shard
// count is drawn again with seed murmur3(attempt as 4 little-endian bytes, seed 0), attempt 1,
// 2, ...), then hash mod shard count. FNV-1a mod shard count is kept for older rsc producers.
#pragma once

#include <cstdint>
#include <string_view>

namespace rsc::protocol {

uint32_t murmur3_32(std::string_view data, uint32_t seed);
uint32_t fnv1a_32(std::string_view data);

// `shardCount` > 0 (it may exceed a stream's limit; only tests need that); 0 answers 0.
uint32_t murmur3_unbiased_shard(std::string_view key, uint32_t shardCount);
uint32_t fnv1a_shard(std::string_view key, uint32_t shardCount);

// The Redis Cluster slot of a key (CRC16 of its {hash tag} if it has one, mod 16384): where a
// producer's writes to a shard stream land, shown in the producer routing answer.
uint16_t redis_crc16(std::string_view data);
int redis_key_slot(std::string_view key);

}  // namespace rsc::protocol

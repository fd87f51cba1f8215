// The producers' partitioner. The expected values were computed outside this code base: the
// MurmurHash3 vectors are the algorithm's published ones, and the key -> shard pairs come from a
// separate implementation of the rule (a short Python script written from the rule's
// description, checked against the same published vectors).
#include <gtest/gtest.h>

#include "protocol/partition.hpp"

using namespace rsc::protocol;

TEST(Partition, Murmur3MatchesThePublishedVectors) {
  EXPECT_EQ(murmur3_32("", 0), 0u);
  EXPECT_EQ(murmur3_32("", 1), 0x514E28B7u);
  EXPECT_EQ(murmur3_32("hello", 0), 0x248BFA47u);
  EXPECT_EQ(murmur3_32("The quick brown fox jumps over the lazy dog", 0), 0x2E4FF723u);
}

TEST(Partition, KeysGoWhereTheReferenceClientsPutThem) {
  EXPECT_EQ(murmur3_unbiased_shard("order-123", 4), 1u);
  EXPECT_EQ(murmur3_unbiased_shard("order-123", 16), 13u);
  EXPECT_EQ(murmur3_unbiased_shard("order-123", 65536), 5309u);
  EXPECT_EQ(murmur3_unbiased_shard("customer-42", 4), 1u);
  EXPECT_EQ(murmur3_unbiased_shard("", 4), 0u);
  EXPECT_EQ(murmur3_unbiased_shard("k1", 7), 4u);
  EXPECT_EQ(murmur3_unbiased_shard("\xD0\xBA\xD0\xBB\xD1\x8E\xD1\x87", 12), 2u);  // "ключ" in UTF-8
}

// With a modulus near 2^32 about a third of the hashes are drawn again, so the rejection path is
// pinned too (once and twice).
TEST(Partition, HashesAboveTheLastFullRangeAreDrawnAgain) {
  const uint32_t n = 3000000000u;
  EXPECT_GE(murmur3_32("key-0", 0), n) << "this key's first hash is rejected";
  EXPECT_EQ(murmur3_unbiased_shard("key-0", n), 230955161u);
  EXPECT_EQ(murmur3_unbiased_shard("key-2", n), 215336748u);
  EXPECT_EQ(murmur3_unbiased_shard("key-4", n), 452478362u);
  EXPECT_EQ(murmur3_unbiased_shard("key-12", n), 1124772949u);  // rejected twice
}

TEST(Partition, FnvIsKeptForOlderProducers) {
  EXPECT_EQ(fnv1a_32(""), 2166136261u);
  EXPECT_EQ(fnv1a_32("a"), 0xE40C292Cu);
  EXPECT_EQ(fnv1a_shard("a", 7), 0xE40C292Cu % 7);
}

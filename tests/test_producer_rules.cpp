// When a producer reads its routing again and how long it waits to resend (member/producer_rules.hpp),
// on a fake clock.
#include <gtest/gtest.h>

#include "member/producer_rules.hpp"

using rsc::member::resend_backoff_ms;
using rsc::member::RoutingFreshness;

TEST(RoutingFreshness, ReadFirstThenEveryIntervalAndAtOnceAfterAMissingShardStream) {
  RoutingFreshness f(1000);
  EXPECT_TRUE(f.due(0)) << "never read";
  f.read(5000);
  EXPECT_FALSE(f.due(5000));
  EXPECT_FALSE(f.due(5999));
  EXPECT_TRUE(f.due(6000)) << "a new metadataVersion is learned within one interval";
  f.read(6000);
  f.stale();  // a write found its shard stream missing
  EXPECT_TRUE(f.due(6001));
  f.read(6001);
  EXPECT_FALSE(f.due(6002));
}

TEST(RoutingFreshness, AZeroIntervalStillWaitsAMillisecond) {
  RoutingFreshness f(0);
  f.read(10);
  EXPECT_FALSE(f.due(10));
  EXPECT_TRUE(f.due(11));
}

TEST(ResendBackoff, DoublesFrom50MsUpToOneSecond) {
  EXPECT_EQ(resend_backoff_ms(1), 50);
  EXPECT_EQ(resend_backoff_ms(2), 100);
  EXPECT_EQ(resend_backoff_ms(3), 200);
  EXPECT_EQ(resend_backoff_ms(5), 800);
  EXPECT_EQ(resend_backoff_ms(6), 1000);
  EXPECT_EQ(resend_backoff_ms(60), 1000);
}

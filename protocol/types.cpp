#include "protocol/types.hpp"

#include <array>
#include <cstdlib>
#include <string>
#include <utility>

namespace rsc::protocol {
namespace {

template <typename E, std::size_t N>
std::string_view lookup(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [k, v] : table)
    if (k == e) return v;
  return "UNKNOWN";
}

template <typename E, std::size_t N>
std::optional<E> reverse(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view s) {
  for (const auto& [k, v] : table)
    if (v == s) return k;
  return std::nullopt;
}

using HS = HeartbeatStatus;
constexpr std::array<std::pair<HS, std::string_view>, 10> kStatus{{
    {HS::OK, "OK"},
    {HS::RETRY, "RETRY"},
    {HS::SYNC_METADATA, "SYNC_METADATA"},
    {HS::REVOKE_PENDING, "REVOKE_PENDING"},
    {HS::UNKNOWN_MEMBER_ID, "UNKNOWN_MEMBER_ID"},
    {HS::FENCED_MEMBER_EPOCH, "FENCED_MEMBER_EPOCH"},
    {HS::UNSUPPORTED_PROTOCOL, "UNSUPPORTED_PROTOCOL"},
    {HS::INVALID_REQUEST, "INVALID_REQUEST"},
    {HS::GROUP_AUTHORIZATION_FAILED, "GROUP_AUTHORIZATION_FAILED"},
    {HS::UNRELEASED_INSTANCE_ID, "UNRELEASED_INSTANCE_ID"},
}};

using SS = ShardAssignmentState;
constexpr std::array<std::pair<SS, std::string_view>, 4> kShard{{
    {SS::OWNED, "OWNED"}, {SS::REVOKING, "REVOKING"}, {SS::DRAINING, "DRAINING"}, {SS::REVOKED, "REVOKED"}}};

using LS = MemberLifecycleState;
constexpr std::array<std::pair<LS, std::string_view>, 6> kLife{{{LS::STARTING, "STARTING"},
                                                                {LS::ACTIVE, "ACTIVE"},
                                                                {LS::DRAINING, "DRAINING"},
                                                                {LS::LEAVING, "LEAVING"},
                                                                {LS::EXPIRED, "EXPIRED"},
                                                                {LS::FENCED, "FENCED"}}};

using GS = GroupStateName;
constexpr std::array<std::pair<GS, std::string_view>, 4> kGroup{
    {{GS::EMPTY, "EMPTY"}, {GS::ASSIGNING, "ASSIGNING"}, {GS::RECONCILING, "RECONCILING"}, {GS::STABLE, "STABLE"}}};

}  // namespace

std::string_view to_string(HeartbeatStatus s) { return lookup(kStatus, s); }
std::string_view to_string(ShardAssignmentState s) { return lookup(kShard, s); }
std::string_view to_string(MemberLifecycleState s) { return lookup(kLife, s); }
std::string_view to_string(GroupStateName s) { return lookup(kGroup, s); }
std::optional<HeartbeatStatus> heartbeat_status_from(std::string_view s) { return reverse(kStatus, s); }
std::optional<ShardAssignmentState> shard_state_from(std::string_view s) { return reverse(kShard, s); }
std::optional<MemberLifecycleState> lifecycle_from(std::string_view s) { return reverse(kLife, s); }

std::string_view to_string(Retention::Kind k) {
  switch (k) {
    case Retention::Kind::MaxLen: return "maxLen";
    case Retention::Kind::MaxAgeMs: return "maxAgeMs";
    case Retention::Kind::ProcessedByAllGroups: return "processedByAllGroups";
    case Retention::Kind::None: break;
  }
  return "none";
}

std::string encode_retention(const Retention& r) {
  std::string s(to_string(r.kind));
  if (r.kind == Retention::Kind::MaxLen || r.kind == Retention::Kind::MaxAgeMs) s += ":" + std::to_string(r.value);
  return s;
}

std::optional<Retention> decode_retention(std::string_view s) {
  if (s.empty() || s == "none") return Retention{};
  if (s == "processedByAllGroups") return Retention{Retention::Kind::ProcessedByAllGroups, 0};
  const auto colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto kind = s.substr(0, colon);
  const std::string num(s.substr(colon + 1));
  char* end = nullptr;
  const long long v = std::strtoll(num.c_str(), &end, 10);
  if (num.empty() || *end != '\0' || v < 1) return std::nullopt;
  if (kind == "maxLen") return Retention{Retention::Kind::MaxLen, v};
  if (kind == "maxAgeMs" && v >= kMinRetentionAgeMs) return Retention{Retention::Kind::MaxAgeMs, v};
  return std::nullopt;
}

std::string_view to_string(KeyStyle s) { return s == KeyStyle::HashTag ? "hashtag" : "plain"; }
std::string_view to_string(AssignorKind a) {
  switch (a) {
    case AssignorKind::Range: return "range";
    case AssignorKind::RackAware: return "rack-aware";
    case AssignorKind::External: return "external";
    case AssignorKind::CoPartitioned: return "co-partitioned";
    case AssignorKind::Uniform: break;
  }
  return "uniform";
}
std::optional<AssignorKind> assignor_from(std::string_view s) {
  if (s == "uniform") return AssignorKind::Uniform;
  if (s == "range") return AssignorKind::Range;
  if (s == "rack-aware") return AssignorKind::RackAware;
  if (s == "external") return AssignorKind::External;
  if (s == "co-partitioned") return AssignorKind::CoPartitioned;
  return std::nullopt;
}

std::string_view to_string(MigrationState s) {
  switch (s) {
    case MigrationState::PREPARING: return "PREPARING";
    case MigrationState::ACTIVE: return "ACTIVE";
    case MigrationState::DRAINING: return "DRAINING";
    case MigrationState::DEPRECATED: return "DEPRECATED";
    case MigrationState::ROLLING_BACK: return "ROLLING_BACK";
    case MigrationState::ROLLED_BACK: return "ROLLED_BACK";
  }
  return "DEPRECATED";
}

std::optional<MigrationState> migration_state_from(std::string_view s) {
  for (auto m : {MigrationState::PREPARING, MigrationState::ACTIVE, MigrationState::DRAINING, MigrationState::DEPRECATED,
                 MigrationState::ROLLING_BACK, MigrationState::ROLLED_BACK})
    if (to_string(m) == s) return m;
  return std::nullopt;
}

std::optional<KeyStyle> key_style_from(std::string_view s) {
  if (s == "plain") return KeyStyle::Plain;
  if (s == "hashtag") return KeyStyle::HashTag;
  return std::nullopt;
}

std::string retired_keys_deleting(const std::string& streamPrefix) {
  return "stream " + streamPrefix +
         " is deleting the streams of its retired shards; its shard count can change once that is done (in a moment): retry";
}

std::string stream_key_pattern(const std::string& prefix, KeyStyle style) {
  return style == KeyStyle::HashTag ? "{" + prefix + ":{shardIndex}}" : prefix + ":{shardIndex}";
}

std::string shard_stream_key(const std::string& prefix, KeyStyle style, int32_t shard) {
  return style == KeyStyle::HashTag ? "{" + prefix + ":" + std::to_string(shard) + "}"
                                    : prefix + ":" + std::to_string(shard);
}

std::string trimmed_unread_key(const std::string& shardKey) {
  const auto open = shardKey.find('{');
  const auto close = open == std::string::npos ? std::string::npos : shardKey.find('}', open + 1);
  const bool tagged = close != std::string::npos && close > open + 1;
  return (tagged ? shardKey : "{" + shardKey + "}") + ":trimmed-unread";
}

std::string expand_key_pattern(const std::string& pattern, int32_t shard) {
  static constexpr std::string_view kHole = "{shardIndex}";
  std::string out = pattern;
  for (auto at = out.find(kHole); at != std::string::npos; at = out.find(kHole, at))
    out.replace(at, kHole.size(), std::to_string(shard));
  return out;
}


}  // namespace rsc::protocol

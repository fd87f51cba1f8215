#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

#include <algorithm>
#include <array>
#include <ctime>
#include <cstdio>
#include <charconv>

#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace rsc::protocol {
namespace {

using messages::is_stream_id;
using messages::request_io;
using messages::response_io;

using json = nlohmann::json;

// Thrown only inside this file (and by the wire readers), always caught by the decode_* entry points.
using Invalid = wire::WireInvalid;
using wire::join;
using wire::type_name;

[[noreturn]] void fail(const std::string& field, const std::string& what,
                       HeartbeatStatus status = HeartbeatStatus::INVALID_REQUEST) {
  wire::wire_fail(field, what, status);
}

const json* find(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& require(const json& obj, const std::string& parent, const char* key) {
  const json* v = find(obj, key);
  if (v == nullptr) fail(join(parent, key), "is required");
  return *v;
}

int64_t as_int(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  return wire::checked_int(v, field, lo, hi);
}

std::string as_string(const json& v, const std::string& field, std::size_t maxLen) {
  if (!v.is_string()) fail(field, "expected a string, got " + type_name(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) fail(field, "must not be empty");
  if (s.size() > maxLen) fail(field, "must be at most " + std::to_string(maxLen) + " characters");
  return s;
}

const json& as_object(const json& v, const std::string& field) {
  if (!v.is_object()) fail(field, "expected an object, got " + type_name(v));
  return v;
}

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

// An optional "keyStyle" field: absent or null is nullopt, anything but "plain" or "hashtag" fails.
std::optional<KeyStyle> optional_key_style(const json& j) {
  const json* k = find(j, "keyStyle");
  if (k == nullptr || k->is_null()) return std::nullopt;
  const auto v = as_string(*k, "keyStyle", 16);
  const auto style = key_style_from(v);
  if (!style) fail("keyStyle", "'" + v + "' is not a key style (plain: prefix:i, hashtag: {prefix:i})");
  return style;
}


template <typename T, typename F>
Decoded<T> guarded(F&& f) {
  Decoded<T> out;
  try {
    out.value = f();
  } catch (const Invalid& e) {
    out.error = e.error;
  } catch (const json::exception& e) {  // defensive: a conversion we did not foresee
    out.error = {HeartbeatStatus::INVALID_REQUEST, "", std::string("malformed request: ") + e.what()};
  }
  return out;
}

// nlohmann's document builder, stopped (parsing ends at once) when arrays and objects nest
// deeper than kMaxJsonDepth.
class DepthLimitedBuilder : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  explicit DepthLimitedBuilder(json& j) : Base(j, /*allow_exceptions=*/false) {}
  bool start_object(std::size_t n) { return ++depth_ <= kMaxJsonDepth && Base::start_object(n); }
  bool end_object() { return --depth_, Base::end_object(); }
  bool start_array(std::size_t n) { return ++depth_ <= kMaxJsonDepth && Base::start_array(n); }
  bool end_array() { return --depth_, Base::end_array(); }
  bool too_deep() const { return depth_ > kMaxJsonDepth; }

 private:
  int depth_ = 0;
};

// A body's document, or null with why it is none.
enum class BodyFault { None, NotJson, TooDeep };
json read_document(std::string_view body, BodyFault& fault) {
  json j;
  DepthLimitedBuilder builder(j);
  const bool ok = json::sax_parse(body.begin(), body.end(), &builder, json::input_format_t::json, /*strict=*/true);
  fault = builder.too_deep() ? BodyFault::TooDeep : !ok || builder.is_errored() ? BodyFault::NotJson : BodyFault::None;
  if (fault != BodyFault::None) return nullptr;
  return j;
}
std::string too_deep_message() {
  return "body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels";
}

json parse_body(std::string_view body) {
  BodyFault fault = BodyFault::None;
  json j = read_document(body, fault);
  if (fault == BodyFault::TooDeep) fail("", too_deep_message());
  if (fault == BodyFault::NotJson) fail("", "body is not valid JSON");
  return j;
}

}  // namespace

std::optional<HeartbeatRequest> decode_heartbeat_request_fast(std::string_view body, std::string_view pathMemberId) {
  wire::FastIn in(body);
  HeartbeatRequest r;
  if (!request_io(in, r, pathMemberId) || !in.at_end()) return std::nullopt;
  return r;
}


bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<ValidationError> validate_name(std::string_view field, std::string_view value) {
  if (valid_name(value)) return std::nullopt;
  std::string f(field);
  return ValidationError{HeartbeatStatus::INVALID_REQUEST, f,
                         f + ": '" + std::string(value.substr(0, 140)) + "' must match [A-Za-z0-9._:-]{1,128}"};
}

static HeartbeatRequest parse_request(const json& j, std::string_view pathMemberId) {
  wire::DocIn in(j, "");
  HeartbeatRequest r;
  request_io(in, r, pathMemberId);
  return r;
}

Decoded<HeartbeatRequest> decode_heartbeat_request_json(const json& j, std::string_view pathMemberId) {
  return guarded<HeartbeatRequest>([&] { return parse_request(j, pathMemberId); });
}

Decoded<HeartbeatRequest> decode_heartbeat_request(std::string_view body, std::string_view pathMemberId) {
  if (auto fast = decode_heartbeat_request_fast(body, pathMemberId)) {
    Decoded<HeartbeatRequest> out;
    out.value = std::move(fast);
    return out;
  }
  json j;
  auto out = guarded<HeartbeatRequest>([&] {
    j = parse_body(body);
    return parse_request(j, pathMemberId);
  });
  if (!out.ok() && j.is_object()) {
    auto it = j.find("requestId");
    if (it != j.end() && it->is_string()) out.requestId = it->get<std::string>();
  }
  return out;
}

static HeartbeatResponse parse_response(const json& j) {
  wire::DocIn in(j, "");
  HeartbeatResponse r;
  response_io(in, r);
  return r;
}

std::optional<HeartbeatResponse> decode_heartbeat_response_fast(std::string_view body) {
  wire::FastIn in(body);
  HeartbeatResponse r;
  if (!response_io(in, r) || !in.at_end()) return std::nullopt;
  return r;
}

Decoded<HeartbeatResponse> decode_heartbeat_response_json(const json& j) {
  return guarded<HeartbeatResponse>([&] { return parse_response(j); });
}

Decoded<HeartbeatResponse> decode_heartbeat_response(std::string_view body) {
  if (auto fast = decode_heartbeat_response_fast(body)) {
    Decoded<HeartbeatResponse> out;
    out.value = std::move(fast);
    return out;
  }
  return guarded<HeartbeatResponse>([&] { return parse_response(parse_body(body)); });
}

Decoded<int32_t> decode_shard_count_body(std::string_view body) {
  return guarded<int32_t>([&] {
    json j = parse_body(body);
    as_object(j, "");
    return static_cast<int32_t>(as_int(require(j, "", "shardCount"), "shardCount", 1, kMaxShardCount));
  });
}

static Retention retention_from(const json& j, const std::string& at) {
  as_object(j, at);
  const auto policy = as_string(require(j, at, "policy"), join(at, "policy"), 64);
  const json* v = find(j, "value");
  const bool valued = v != nullptr && !v->is_null();
  Retention r;
  if (policy == "maxLen" || policy == "maxAgeMs") {
    if (!valued) fail(join(at, "value"), "is required for " + policy);
    r.kind = policy == "maxLen" ? Retention::Kind::MaxLen : Retention::Kind::MaxAgeMs;
    r.value = as_int(*v, join(at, "value"), policy == "maxLen" ? 1 : kMinRetentionAgeMs, int64_t{1} << 53);
  } else if (policy == "none" || policy == "processedByAllGroups") {
    if (valued) fail(join(at, "value"), "takes no value with " + policy);
    r.kind = policy == "none" ? Retention::Kind::None : Retention::Kind::ProcessedByAllGroups;
  } else {
    fail(join(at, "policy"), "must be none, maxLen, maxAgeMs or processedByAllGroups, not '" + policy + "'");
  }
  return r;
}

Decoded<Retention> decode_retention_body(std::string_view body) {
  return guarded<Retention>([&] { return retention_from(parse_body(body), ""); });
}

namespace {
// The body of an admin call, or null when it is not JSON: its decoder says what it should have
// been. A body nested too deep is refused saying so (`tooDeep` is set).
json admin_body(std::string_view body, bool& tooDeep) {
  BodyFault fault = BodyFault::None;
  json j = read_document(body, fault);
  tooDeep = fault == BodyFault::TooDeep;
  return j;
}
template <typename T>
Decoded<T> refused(std::string message) {
  Decoded<T> out;
  out.error = {HeartbeatStatus::INVALID_REQUEST, "", std::move(message)};
  return out;
}
}  // namespace

bool valid_stream_id(const std::string& s) { return is_stream_id(s); }

std::optional<std::string> reset_position(const std::string& to) {
  if (to == "earliest") return std::string("0");
  if (to == "latest") return std::string("$");
  if (valid_stream_id(to)) return to;
  if (to.empty() || to.size() > 19 || to.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const unsigned long long ms = std::stoull(to);
  if (ms == 0) return std::string("0");
  return std::to_string(ms - 1) + "-18446744073709551615";  // every id of ms - 1, so delivery starts at ms
}

Decoded<OffsetsResetRequest> decode_reset_offsets_request(std::string_view body) {
  using D = Decoded<OffsetsResetRequest>;
  bool tooDeep = false;
  const json j = admin_body(body, tooDeep);
  if (tooDeep) return refused<OffsetsResetRequest>(too_deep_message());
  if (!j.is_object() || !j.contains("to") || !j["to"].is_string())
    return refused<OffsetsResetRequest>(
        "the body must be {\"to\": \"earliest\" | \"latest\" | an entry id | a time in ms, \"fenceMembers\": false}");
  OffsetsResetRequest r;
  r.to = j["to"].get<std::string>();
  const auto position = reset_position(r.to);
  if (!position)
    return refused<OffsetsResetRequest>("to: earliest, latest, an entry id like 1700000000000-0 or a time in ms since the epoch, not '" +
                                        r.to + "'");
  r.position = *position;
  if (j.contains("fenceMembers")) {
    if (!j["fenceMembers"].is_boolean()) return refused<OffsetsResetRequest>("fenceMembers: true or false");
    r.fenceMembers = j["fenceMembers"].get<bool>();
  }
  D out;
  out.value = std::move(r);
  return out;
}

namespace {
// A "shardRacks" value: a rack name or "" per shard index. An error message, or "" when read.
std::string read_shard_racks(const json& racks, std::vector<std::string>& out) {
  if (!racks.is_array()) return "shardRacks: an array with the rack of each shard, by index (\"\" for none)";
  if (racks.size() > kMaxShardRacks) return "shardRacks: at most " + std::to_string(kMaxShardRacks) + " entries";
  out.clear();
  for (std::size_t i = 0; i < racks.size(); ++i) {
    const auto at = "shardRacks[" + std::to_string(i) + "]";
    if (!racks[i].is_string()) return at + ": a rack name or \"\"";
    auto rack = racks[i].get<std::string>();
    if (!rack.empty() && !valid_name(rack)) return at + ": '" + rack.substr(0, 140) + "' must match [A-Za-z0-9._:-]{1,128}";
    out.push_back(std::move(rack));
  }
  return {};
}
}  // namespace

Decoded<StreamRacksRequest> decode_stream_racks(std::string_view body) {
  using R = StreamRacksRequest;
  bool tooDeep = false;
  const json j = admin_body(body, tooDeep);
  if (tooDeep) return refused<R>(too_deep_message());
  const std::string shape = std::string("the body must be {\"shardRacks\": [a rack per shard, \"\" for none]} or {\"from\": \"") +
                            kShardRacksFromClusterZones + "\"}";
  if (!j.is_object()) return refused<R>(shape);
  for (const auto& [k, v] : j.items())
    if (k != "shardRacks" && k != "from") return refused<R>("unknown field '" + k + "': " + shape);
  R r;
  if (j.contains("shardRacks") == j.contains("from")) return refused<R>("shardRacks or from, one of them: " + shape);
  if (j.contains("from")) {
    if (!j["from"].is_string() || j["from"].get<std::string>() != kShardRacksFromClusterZones)
      return refused<R>(std::string("from: the only rule is \"") + kShardRacksFromClusterZones +
                        "\" (the zone of the Redis node serving each shard's key)");
    r.fromClusterZones = true;
  } else if (auto why = read_shard_racks(j["shardRacks"], r.shardRacks); !why.empty()) {
    return refused<R>(why);
  }
  Decoded<R> out;
  out.value = std::move(r);
  return out;
}

Decoded<GroupConfig> decode_group_config(std::string_view body) {
  using R = GroupConfig;
  bool tooDeep = false;
  const json j = admin_body(body, tooDeep);
  if (tooDeep) return refused<R>(too_deep_message());
  const char* shape =
      "the body must be {\"assignor\": \"uniform\" | \"range\" | \"rack-aware\" | \"external\", \"shardRacks\": [a rack per "
      "shard]} or {\"coPartitionedWith\": {\"prefix\": stream, \"group\": group}}";
  if (!j.is_object()) return refused<R>(shape);
  for (const auto& [k, v] : j.items())
    if (k != "assignor" && k != "shardRacks" && k != "coPartitionedWith") return refused<R>("unknown field '" + k + "': " + shape);
  R r;
  if (j.contains("coPartitionedWith")) {
    const auto& w = j["coPartitionedWith"];
    const char* linkShape = "coPartitionedWith: {\"prefix\": the other stream, \"group\": its group}";
    if (!w.is_object() || w.size() != 2 || !w.contains("prefix") || !w.contains("group") || !w["prefix"].is_string() ||
        !w["group"].is_string())
      return refused<R>(linkShape);
    const auto prefix = w["prefix"].get<std::string>(), group = w["group"].get<std::string>();
    if (!valid_name(prefix)) return refused<R>("coPartitionedWith.prefix: '" + prefix.substr(0, 140) + "' must match [A-Za-z0-9._:-]{1,128}");
    if (!valid_name(group)) return refused<R>("coPartitionedWith.group: '" + group.substr(0, 140) + "' must match [A-Za-z0-9._:-]{1,128}");
    r.coPartitionedWith = GroupKey{prefix, group};
    if (j.contains("shardRacks")) return refused<R>("shardRacks: not with coPartitionedWith (co-partitioned groups split by index, not by rack)");
  }
  if (!j.contains("assignor") && r.coPartitionedWith) {
    r.assignor = AssignorKind::CoPartitioned;
  } else {
    if (!j.contains("assignor")) return refused<R>(std::string("assignor: is required; ") + shape);
    if (!j["assignor"].is_string())  // there, but of the wrong type: said so, not "required"
      return refused<R>("assignor: must be a string (uniform, range, rack-aware, external or co-partitioned), not " +
                        (j["assignor"].is_null() ? std::string("null")
                                                 : std::string(j["assignor"].type_name()) + " " + j["assignor"].dump().substr(0, 140)));
    const auto name = j["assignor"].get<std::string>();
    const auto kind = assignor_from(name);
    if (!kind) return refused<R>("assignor: uniform, range, rack-aware, external or co-partitioned, not '" + name.substr(0, 140) + "'");
    r.assignor = *kind;
  }
  if (r.assignor == AssignorKind::CoPartitioned && !r.coPartitionedWith)
    return refused<R>("coPartitionedWith: is required with the co-partitioned assignor (the group of the other stream)");
  if (r.assignor != AssignorKind::CoPartitioned && r.coPartitionedWith)
    return refused<R>("assignor: a co-partitioned group's assignor is co-partitioned, not '" + std::string(to_string(r.assignor)) + "'");
  if (j.contains("shardRacks")) {
    r.shardRacks.emplace();
    if (auto why = read_shard_racks(j["shardRacks"], *r.shardRacks); !why.empty()) return refused<R>(why);
  }
  Decoded<R> out;
  out.value = std::move(r);
  return out;
}

Decoded<PostedTarget> decode_posted_target(std::string_view body) {
  using R = PostedTarget;
  bool tooDeep = false;
  const json j = admin_body(body, tooDeep);
  if (tooDeep) return refused<R>(too_deep_message());
  const char* shape = "the body must be {\"groupEpoch\": n, \"targetAssignment\": {\"memberId\": [shard, ...]}}";
  if (!j.is_object()) return refused<R>(shape);
  for (const auto& [k, v] : j.items())
    if (k != "groupEpoch" && k != "targetAssignment") return refused<R>("unknown field '" + k + "': " + shape);
  R r;
  const auto epoch = j.find("groupEpoch");
  if (epoch == j.end() || !epoch->is_number_integer() || epoch->get<int64_t>() < 0 || epoch->get<int64_t>() > INT32_MAX)
    return refused<R>(std::string("groupEpoch: the group epoch the target was computed for (describe's groupEpoch); ") + shape);
  r.groupEpoch = epoch->get<int32_t>();
  const auto target = j.find("targetAssignment");
  if (target == j.end() || !target->is_object()) return refused<R>(std::string("targetAssignment: an object of member id -> shards; ") + shape);
  if (target->size() > kMaxTargetMembers) return refused<R>("targetAssignment: at most " + std::to_string(kMaxTargetMembers) + " members");
  for (const auto& [member, shards] : target->items()) {
    const auto at = "targetAssignment." + member.substr(0, 140);
    if (!valid_name(member)) return refused<R>("targetAssignment: member id '" + member.substr(0, 140) + "' must match [A-Za-z0-9._:-]{1,128}");
    if (!shards.is_array()) return refused<R>(at + ": a list of shard indices");
    auto& list = r.target[member];
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const auto& s = shards[i];
      if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() > INT32_MAX)
        return refused<R>(at + "[" + std::to_string(i) + "]: a shard index (0 or more)");
      list.push_back(s.get<int32_t>());
    }
  }
  Decoded<R> out;
  out.value = std::move(r);
  return out;
}

Decoded<DeadLetterSelection> decode_dead_letter_selection(std::string_view body) {
  using R = DeadLetterSelection;
  bool tooDeep = false;
  const json j = admin_body(body, tooDeep);
  if (tooDeep) return refused<R>(too_deep_message());
  if (!j.is_object()) return refused<R>("the body must be a JSON object: {\"deadLetterIds\": [...]} or {\"all\": true}");
  for (const auto& [k, v] : j.items())
    if (k != "all" && k != "deadLetterIds")
      return refused<R>("unknown field '" + k + "': the body is {\"deadLetterIds\": [...]} or {\"all\": true}");
  R r;
  if (j.contains("all")) {
    if (!j["all"].is_boolean()) return refused<R>("all: true or false");
    r.all = j["all"].get<bool>();
  }
  if (j.contains("deadLetterIds")) {
    if (!j["deadLetterIds"].is_array()) return refused<R>("deadLetterIds: an array of dead-letter ids");
    for (const auto& x : j["deadLetterIds"]) {
      if (!x.is_string() || !valid_stream_id(x.get<std::string>()))
        return refused<R>("deadLetterIds: each one an entry id like 1700000000000-0");
      r.ids.push_back(x.get<std::string>());
    }
  }
  if (r.all == !r.ids.empty()) return refused<R>("name dead letters (deadLetterIds) or ask for all of them, one of the two");
  if (r.ids.size() > kMaxDeadLettersPerCall)
    return refused<R>("deadLetterIds: at most " + std::to_string(kMaxDeadLettersPerCall) + " at a time");
  Decoded<R> out;
  out.value = std::move(r);
  return out;
}

json to_json(const Retention& r) {
  json j{{"policy", std::string(to_string(r.kind))}};
  if (r.kind == Retention::Kind::MaxLen || r.kind == Retention::Kind::MaxAgeMs) j["value"] = r.value;
  return j;
}

Decoded<ScaleRequest> decode_scale_request(std::string_view body, bool rollback) {
  return guarded<ScaleRequest>([&] {
    ScaleRequest r;
    if (rollback && body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
    json j = parse_body(body);
    as_object(j, "");
    if (!rollback) r.targetShardCount = static_cast<int32_t>(as_int(require(j, "", "targetShardCount"), "targetShardCount", 0, kMaxShardCount));
    if (const json* v = find(j, "requestedBy"); v != nullptr && !v->is_null()) r.requestedBy = as_string(*v, "requestedBy", 256);
    if (const json* v = find(j, "reason"); v != nullptr && !v->is_null()) r.reason = as_string(*v, "reason", 1024);
    return r;
  });
}

Decoded<StreamRequest> decode_stream_request(std::string_view body, bool post) {
  return guarded<StreamRequest>([&] {
    json j = parse_body(body);
    as_object(j, "");
    StreamRequest r;
    const char* count = post ? "initialShardCount" : "shardCount";
    if (const json* c = find(j, count); c != nullptr && !c->is_null())
      r.shardCount = static_cast<int32_t>(as_int(*c, count, 1, kMaxShardCount));
    else if (!post)
      fail(count, "is required");
    r.keyStyle = optional_key_style(j);
    if (const json* v = find(j, "requestedBy"); v != nullptr && !v->is_null()) r.requestedBy = as_string(*v, "requestedBy", 256);
    if (const json* v = find(j, "reason"); v != nullptr && !v->is_null()) r.reason = as_string(*v, "reason", 1024);
    if (const json* v = find(j, "retention"); v != nullptr && !v->is_null()) r.retention = retention_from(*v, "retention");
    return r;
  });
}

Decoded<StreamMetadata> decode_stream_metadata(std::string_view body) {
  return guarded<StreamMetadata>([&] {
    json j = parse_body(body);
    as_object(j, "");
    StreamMetadata m;
    m.streamPrefix = as_string(require(j, "", "streamPrefix"), "streamPrefix", 128);
    m.shardCount = static_cast<int32_t>(as_int(require(j, "", "shardCount"), "shardCount", 0, kMaxShardCount));
    m.metadataVersion =
        static_cast<int32_t>(as_int(require(j, "", "metadataVersion"), "metadataVersion", 0, kI32Max));
    m.keyStyle = optional_key_style(j).value_or(KeyStyle::HashTag);  // what a coordinator that does not say used
    return m;
  });
}

json to_json(const Migration& m) {
  return {{"reshardingId", m.reshardingId},
          {"migrationId", m.reshardingId},
          {"fromShardCount", m.fromShardCount},
          {"toShardCount", m.toShardCount},
          {"state", to_string(m.state)},
          // DEPRECATED is the reference implementation's word for a finished migration (the old
          // layout is deprecated); what an operator reads is these two.
          {"kind", m.toShardCount > m.fromShardCount ? "GROW" : m.toShardCount < m.fromShardCount ? "SHRINK" : "SAME"},
          {"done", m.state == MigrationState::DEPRECATED || m.state == MigrationState::ROLLED_BACK},
          {"createdAt", iso8601_ms(m.createdAtMs)},
          {"updatedAt", iso8601_ms(m.updatedAtMs)},
          {"requestedBy", m.requestedBy.empty() ? json(nullptr) : json(m.requestedBy)},
          {"reason", m.reason.empty() ? json(nullptr) : json(m.reason)}};
}

json to_json(const StreamMetadata& m) {
  json j{{"streamPrefix", m.streamPrefix},
         {"shardCount", m.shardCount},
         {"metadataVersion", m.metadataVersion},
         {"keyStyle", to_string(m.keyStyle)},
         {"streamKeyPattern", stream_key_pattern(m.streamPrefix, m.keyStyle)},
         {"drainingShards", m.drainingShards()},
         {"readShardCount", m.readShardCount()}};
  j["activeMigration"] = m.migration && m.migration->state == MigrationState::DRAINING ? to_json(*m.migration) : json(nullptr);
  if (m.migration) j["lastMigration"] = to_json(*m.migration);
  if (!m.shardRacks.empty() || !m.shardRacksFrom.empty()) {
    j["shardRacks"] = m.shardRacks;
    if (!m.shardRacksFrom.empty()) j["shardRacksFrom"] = m.shardRacksFrom;
  }
  if (m.retiredKeys() > 0)
    j["retiredShardKeys"] = {{"from", m.readShardCount()},
                             {"to", m.retiredKeysTo},
                             {"retiredAt", iso8601_ms(m.retiredAtMs)},
                             {"deleting", m.deletingRetired}};
  return j;
}

std::string iso8601_ms(int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];  // room for any int year g++ can imagine
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

// Names from a URL may hold bytes that are not UTF-8: replace them rather than throw.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string encode(const HeartbeatRequest& r) {
  std::string out;
  out.reserve(256 + 64 * (r.ownedShards.size() + r.revokingShards.size() + r.shardProgress.size()));
  {
    wire::Sink sink(out);
    wire::Out w(sink);
    request_io(w, const_cast<HeartbeatRequest&>(r), r.memberId);  // the writer only reads
  }
  return out;
}
// The response is written straight into one string (no JSON document built first: this runs once
// per heartbeat): compact, keys in sorted order (as nlohmann's dump writes a document), strings
// escaped as dump escapes them.
void append_json_string(std::string& out, std::string_view v) {
  bool plain = true;
  for (unsigned char c : v)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  if (plain) {
    out += '"';
    out.append(v.data(), v.size());
    out += '"';
    return;
  }
  out += dump(json(std::string(v)));  // escapes, and replaces bytes that are not UTF-8
}

void append_response(std::string& out, const HeartbeatResponse& r) {
  wire::Sink sink(out);
  wire::Out w(sink);
  response_io(w, const_cast<HeartbeatResponse&>(r));  // the writer only reads
}

std::string encode(const HeartbeatResponse& r) {
  std::string out;
  out.reserve(320);
  append_response(out, r);
  return out;
}
std::string encode(const StreamMetadata& m) { return dump(to_json(m)); }

HeartbeatResponse error_response(std::string_view requestId, std::string_view memberId, HeartbeatStatus status,
                                  std::string message, std::string field) {
  HeartbeatResponse r;
  r.responseTo = std::string(requestId);
  r.memberId = std::string(memberId);
  r.status = status;
  r.message = std::move(message);
  if (!field.empty()) r.errorField = std::move(field);
  return r;
}

HeartbeatResponse refusal(std::string_view requestId, std::string_view memberId, HeartbeatStatus status,
                          std::string message, const Timings& timings, std::string field,
                          std::optional<int32_t> memberEpoch) {
  auto r = error_response(requestId, memberId, status, std::move(message), std::move(field));
  r.heartbeatIntervalMs = timings.heartbeatIntervalMs;
  r.rebalanceTimeoutMs = timings.rebalanceTimeoutMs;
  r.memberLeaseTtlMs = timings.memberLeaseTtlMs;
  if (memberEpoch) r.memberEpoch = *memberEpoch;
  return r;
}

}  // namespace rsc::protocol

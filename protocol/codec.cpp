#include "protocol/codec.hpp"

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

using json = nlohmann::json;

// Thrown only inside this file, always caught by the decode_* entry points.
struct Invalid {
  ValidationError error;
};

[[noreturn]] void fail(const std::string& field, const std::string& what,
                       HeartbeatStatus status = HeartbeatStatus::INVALID_REQUEST) {
  throw Invalid{{status, field, field.empty() ? what : field + ": " + what}};
}

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "non-integer number";
  return j.type_name();
}

std::string join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
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
  if (!v.is_number_integer()) fail(field, "expected an integer, got " + type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(field, "must be at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo) fail(field, "must be at least " + std::to_string(lo));
  if (x > hi) fail(field, "must be at most " + std::to_string(hi));
  return x;
}

std::string as_string(const json& v, const std::string& field, std::size_t maxLen) {
  if (!v.is_string()) fail(field, "expected a string, got " + type_name(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) fail(field, "must not be empty");
  if (s.size() > maxLen) fail(field, "must be at most " + std::to_string(maxLen) + " characters");
  return s;
}

const json& as_array(const json& v, const std::string& field) {
  if (!v.is_array()) fail(field, "expected an array, got " + type_name(v));
  return v;
}

const json& as_object(const json& v, const std::string& field) {
  if (!v.is_object()) fail(field, "expected an object, got " + type_name(v));
  return v;
}

std::string item(const char* list, std::size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

ShardAssignmentState as_shard_state(const json& v, const std::string& field) {
  if (!v.is_string()) fail(field, "expected a string, got " + type_name(v));
  auto st = shard_state_from(v.get_ref<const std::string&>());
  if (!st) fail(field, "unknown shard state '" + v.get<std::string>() + "' (OWNED, REVOKING, DRAINING, REVOKED)");
  return *st;
}

// A shard reference in revokingShards and shardProgress: {"shardIndex": n}, or nested as other
// clients write it, {"shard": {"shardIndex": n}}. Both forms at once must agree.
int32_t shard_index_of(const json& o, const std::string& f) {
  const json* flat = find(o, "shardIndex");
  const json* nested = find(o, "shard");
  if (nested != nullptr && !nested->is_null()) {
    const auto& n = as_object(*nested, f + ".shard");
    const auto s = static_cast<int32_t>(as_int(require(n, f + ".shard", "shardIndex"), f + ".shard.shardIndex", 0, kI32Max));
    if (flat != nullptr && static_cast<int32_t>(as_int(*flat, f + ".shardIndex", 0, kI32Max)) != s)
      fail(f + ".shardIndex", "differs from " + f + ".shard.shardIndex");
    return s;
  }
  return static_cast<int32_t>(as_int(require(o, f, "shardIndex"), f + ".shardIndex", 0, kI32Max));
}

// An optional "keyStyle" field: absent or null is nullopt, anything but "plain" or "hashtag" fails.
std::optional<KeyStyle> optional_key_style(const json& j) {
  const json* k = find(j, "keyStyle");
  if (k == nullptr || k->is_null()) return std::nullopt;
  const auto v = as_string(*k, "keyStyle", 16);
  const auto style = key_style_from(v);
  if (!style) fail("keyStyle", "'" + v + "' is not a key style (plain: prefix:i, hashtag: {prefix:i})");
  return style;
}

// A Redis stream id: "<ms>-<seq>", both decimal.
bool is_stream_id(const std::string& s) {
  auto dash = s.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == s.size() || s.size() > 41) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != dash && (s[i] < '0' || s[i] > '9')) return false;
  return true;
}

HeartbeatRequest parse_request(const json& j, std::string_view pathMemberId) {
  as_object(j, "");
  // The version is checked first: a future version may change any other field.
  const auto version = as_int(require(j, "", "protocolVersion"), "protocolVersion", std::numeric_limits<int32_t>::min(),
                              kI32Max);
  if (version != kProtocolVersion)
    fail("protocolVersion", "unsupported version " + std::to_string(version) + ", this coordinator speaks " +
                                std::to_string(kProtocolVersion),
         HeartbeatStatus::UNSUPPORTED_PROTOCOL);

  HeartbeatRequest r;
  r.protocolVersion = static_cast<int32_t>(version);
  r.requestId = as_string(require(j, "", "requestId"), "requestId", 256);
  r.memberId = as_string(require(j, "", "memberId"), "memberId", 1024);
  if (auto e = validate_name("memberId", r.memberId)) throw Invalid{*e};
  if (r.memberId != pathMemberId)
    fail("memberId", "body memberId '" + r.memberId + "' does not match the path memberId '" +
                         std::string(pathMemberId) + "'");
  r.memberEpoch = static_cast<int32_t>(as_int(require(j, "", "memberEpoch"), "memberEpoch", -2, kI32Max));
  r.metadataVersion =
      static_cast<int32_t>(as_int(require(j, "", "metadataVersion"), "metadataVersion", 0, kI32Max));
  if (const json* le = find(j, "leavingMemberEpoch"); le != nullptr && !le->is_null())
    r.leavingMemberEpoch = static_cast<int32_t>(as_int(*le, "leavingMemberEpoch", 1, kI32Max));
  if (const json* in = find(j, "instanceId"); in != nullptr && !in->is_null()) {
    r.instanceId = as_string(*in, "instanceId", 1024);
    if (auto e = validate_name("instanceId", *r.instanceId)) throw Invalid{*e};
  }
  if (r.memberEpoch == -2 && !r.instanceId)
    fail("instanceId", "memberEpoch -2 (leave, coming back) is for static members: send the member's instanceId");

  const auto& cap = as_object(require(j, "", "runtimeConsumerCapacity"), "runtimeConsumerCapacity");
  r.runtimeConsumerCapacity.runtimeMaxConcurrency = static_cast<int32_t>(
      as_int(require(cap, "runtimeConsumerCapacity", "runtimeMaxConcurrency"),
             "runtimeConsumerCapacity.runtimeMaxConcurrency", 0, kI32Max));
  r.runtimeConsumerCapacity.availableConcurrency = static_cast<int32_t>(
      as_int(require(cap, "runtimeConsumerCapacity", "availableConcurrency"),
             "runtimeConsumerCapacity.availableConcurrency", 0, kI32Max));

  // A shard may appear once across ownedShards and revokingShards together.
  std::set<int32_t> held;
  const auto& owned = as_array(require(j, "", "ownedShards"), "ownedShards");
  for (std::size_t i = 0; i < owned.size(); ++i) {
    const auto f = item("ownedShards", i);
    const auto& o = as_object(owned[i], f);
    OwnedShard s;
    s.shardIndex = static_cast<int32_t>(as_int(require(o, f, "shardIndex"), f + ".shardIndex", 0, kI32Max));
    if (const json* st = find(o, "state")) {
      s.state = as_shard_state(*st, f + ".state");
      if (s.state != ShardAssignmentState::OWNED)
        fail(f + ".state", "an owned shard must be OWNED; report a shard being given up in revokingShards");
    }
    if (!held.insert(s.shardIndex).second)
      fail(f + ".shardIndex", "duplicate shard " + std::to_string(s.shardIndex));
    r.ownedShards.push_back(s);
  }
  if (const json* rv = find(j, "revokingShards"); rv != nullptr && !rv->is_null()) {
    as_array(*rv, "revokingShards");
    for (std::size_t i = 0; i < rv->size(); ++i) {
      const auto f = item("revokingShards", i);
      const auto& o = as_object((*rv)[i], f);
      RevokingShard s;
      s.shardIndex = shard_index_of(o, f);
      s.state = as_shard_state(require(o, f, "state"), f + ".state");
      if (s.state == ShardAssignmentState::OWNED)
        fail(f + ".state", "a revoking shard must be REVOKING, DRAINING or REVOKED");
      s.inFlight = static_cast<int32_t>(as_int(require(o, f, "inFlight"), f + ".inFlight", 0, kI32Max));
      if (s.state == ShardAssignmentState::REVOKED && s.inFlight != 0)
        fail(f + ".inFlight", "a REVOKED shard must have inFlight 0");
      if (const json* a = find(o, "ackedAt"); a != nullptr && !a->is_null()) {
        if (a->is_string())
          s.ackedAt = a->get<std::string>();
        else if (a->is_number_integer())
          s.ackedAt = std::to_string(a->get<int64_t>());
        else
          fail(f + ".ackedAt", "expected null, a string or an integer, got " + type_name(*a));
      }
      if (!held.insert(s.shardIndex).second)
        fail(f + ".shardIndex", "duplicate shard " + std::to_string(s.shardIndex));
      r.revokingShards.push_back(s);
    }
  }
  if (const json* pg = find(j, "shardProgress"); pg != nullptr && !pg->is_null()) {
    as_array(*pg, "shardProgress");
    std::set<int32_t> seen;
    for (std::size_t i = 0; i < pg->size(); ++i) {
      const auto f = item("shardProgress", i);
      const auto& o = as_object((*pg)[i], f);
      ShardProgress p;
      p.shardIndex = shard_index_of(o, f);
      if (const json* v = find(o, "lastDeliveredId"); v != nullptr && !v->is_null()) {
        p.lastDeliveredId = as_string(*v, f + ".lastDeliveredId", 64);
        if (!is_stream_id(*p.lastDeliveredId))
          fail(f + ".lastDeliveredId", "'" + *p.lastDeliveredId + "' is not a stream id like 1700000000000-0");
      }
      if (const json* v = find(o, "pending"); v != nullptr && !v->is_null())
        p.pending = as_int(*v, f + ".pending", 0, kI64Max);
      if (const json* v = find(o, "pendingCount"); v != nullptr && !v->is_null()) {  // the same, other clients' name
        const auto n = as_int(*v, f + ".pendingCount", 0, kI64Max);
        if (p.pending && *p.pending != n)
          fail(f + ".pendingCount", "is " + std::to_string(n) + " but pending is " + std::to_string(*p.pending));
        p.pending = n;
      }
      if (const json* v = find(o, "lag"); v != nullptr && !v->is_null()) p.lag = as_int(*v, f + ".lag", 0, kI64Max);
      if (!seen.insert(p.shardIndex).second)
        fail(f + ".shardIndex", "duplicate shard " + std::to_string(p.shardIndex));
      r.shardProgress.push_back(p);
    }
  }
  return r;
}

std::vector<int32_t> parse_shard_refs(const json& v, const std::string& field) {
  std::vector<int32_t> out;
  as_array(v, field);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto f = field + "[" + std::to_string(i) + "]";
    const auto& o = as_object(v[i], f);
    out.push_back(static_cast<int32_t>(as_int(require(o, f, "shardIndex"), f + ".shardIndex", 0, kI32Max)));
  }
  return out;
}

HeartbeatResponse parse_response(const json& j) {
  as_object(j, "");
  HeartbeatResponse r;
  if (const json* v = find(j, "responseTo"); v != nullptr && v->is_string()) r.responseTo = v->get<std::string>();
  const auto& st = require(j, "", "status");
  if (!st.is_string()) fail("status", "expected a string, got " + type_name(st));
  auto status = heartbeat_status_from(st.get_ref<const std::string&>());
  if (!status) fail("status", "unknown status '" + st.get<std::string>() + "'");
  r.status = *status;
  if (const json* v = find(j, "memberId"); v != nullptr && v->is_string()) r.memberId = v->get<std::string>();
  auto opt_int = [&](const char* k, int64_t lo, int64_t hi, int64_t dflt) {
    const json* v = find(j, k);
    return (v == nullptr || v->is_null()) ? dflt : as_int(*v, k, lo, hi);
  };
  r.memberEpoch = static_cast<int32_t>(opt_int("memberEpoch", -2, kI32Max, 0));
  r.heartbeatIntervalMs = opt_int("heartbeatIntervalMs", 0, kI64Max, 0);
  r.rebalanceTimeoutMs = opt_int("rebalanceTimeoutMs", 0, kI64Max, 0);
  r.memberLeaseTtlMs = opt_int("memberLeaseTtlMs", 0, kI64Max, 0);
  r.groupEpoch = static_cast<int32_t>(opt_int("groupEpoch", 0, kI32Max, 0));
  r.assignmentEpoch = static_cast<int32_t>(opt_int("assignmentEpoch", 0, kI32Max, 0));
  r.metadataVersion = static_cast<int32_t>(opt_int("metadataVersion", 0, kI32Max, 0));
  if (const json* a = find(j, "assignment"); a != nullptr && !a->is_null()) {
    as_object(*a, "assignment");
    Assignment as;
    if (const json* e = find(*a, "error"); e != nullptr && e->is_string()) as.error = e->get<std::string>();
    as.assignedShards = parse_shard_refs(require(*a, "assignment", "assignedShards"), "assignment.assignedShards");
    if (const json* p = find(*a, "pendingShards"); p != nullptr && !p->is_null())
      as.pendingShards = parse_shard_refs(*p, "assignment.pendingShards");
    if (const json* m = find(*a, "metadataVersion"); m != nullptr && !m->is_null())
      as.metadataVersion = static_cast<int32_t>(as_int(*m, "assignment.metadataVersion", 0, kI32Max));
    r.assignment = std::move(as);
  }
  if (const json* m = find(j, "message"); m != nullptr && m->is_string()) r.message = m->get<std::string>();
  if (const json* f = find(j, "errorField"); f != nullptr && f->is_string()) r.errorField = f->get<std::string>();
  return r;
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

// ---- the fast path --------------------------------------------------------------------------
// The heartbeat body as members write it (known keys, integers, plain ASCII strings, each key
// once), parsed straight into the request with no document in between. It accepts only bodies
// the full decoder accepts, giving the same request (the codec fuzzer checks both); anything else
// (an escape, a float, an unknown key or nested form, a duplicate, any invalid value) makes it
// give up, and the full decoder decides, with its error messages.
class FastRequest {
 public:
  FastRequest(std::string_view body, std::string_view path) : p_(body.data()), end_(body.data() + body.size()), path_(path) {}

  std::optional<HeartbeatRequest> parse() {
    HeartbeatRequest r;
    enum Seen : unsigned { kVersion = 1, kRequestId = 2, kMember = 4, kEpoch = 8, kMeta = 16, kCap = 32, kOwned = 64,
                           kRevoking = 128, kProgress = 256, kLeavingEpoch = 512, kInstance = 1024 };
    unsigned seen = 0;
    bool ok = object([&](std::string_view key) {
      auto once = [&](unsigned bit) { return first(seen, bit); };
      if (key == "protocolVersion") {
        int64_t v = 0;
        if (!once(kVersion) || !integer(v) || v != kProtocolVersion) return false;
        r.protocolVersion = static_cast<int32_t>(v);
        return true;
      }
      if (key == "requestId") return once(kRequestId) && string(r.requestId, 256);
      if (key == "memberId")
        return once(kMember) && string(r.memberId, 1024) && valid_name(r.memberId) && r.memberId == path_;
      if (key == "memberEpoch") return once(kEpoch) && int_in(r.memberEpoch, -1, kI32Max);
      if (key == "metadataVersion") return once(kMeta) && int_in(r.metadataVersion, 0, kI32Max);
      if (key == "leavingMemberEpoch") {
        int32_t e = 0;
        return once(kLeavingEpoch) && int_in(e, 1, kI32Max) && (r.leavingMemberEpoch = e, true);
      }
      if (key == "instanceId") {
        std::string id;
        return once(kInstance) && string(id, 1024) && valid_name(id) && (r.instanceId = std::move(id), true);
      }
      if (key == "runtimeConsumerCapacity") {
        unsigned fields = 0;
        return once(kCap) && object([&](std::string_view k) {
                 auto& c = r.runtimeConsumerCapacity;
                 if (k == "runtimeMaxConcurrency" && first(fields, 1)) return int_in(c.runtimeMaxConcurrency, 0, kI32Max);
                 if (k == "availableConcurrency" && first(fields, 2)) return int_in(c.availableConcurrency, 0, kI32Max);
                 return false;
               }) && fields == 3;
      }
      if (key == "ownedShards") {
        return once(kOwned) && array([&] {
                 OwnedShard s;
                 unsigned fields = 0;
                 return object([&](std::string_view k) {
                          if (k == "shardIndex" && first(fields, 1)) return int_in(s.shardIndex, 0, kI32Max);
                          if (k == "state" && first(fields, 2)) {
                            std::string_view st;
                            return text(st, 16) && st == "OWNED";
                          }
                          return false;
                        }) &&
                        (fields & 1) && (add(r.ownedShards, s), true);
               });
      }
      if (key == "revokingShards") {
        return once(kRevoking) && (null() || array([&] {
                 RevokingShard s;
                 unsigned fields = 0;
                 return object([&](std::string_view k) {
                          if (k == "shardIndex" && first(fields, 1)) return int_in(s.shardIndex, 0, kI32Max);
                          if (k == "state" && first(fields, 2)) {
                            std::string_view st;
                            if (!text(st, 16)) return false;
                            auto parsed = shard_state_from(st);
                            if (!parsed || *parsed == ShardAssignmentState::OWNED) return false;
                            s.state = *parsed;
                            return true;
                          }
                          if (k == "inFlight" && first(fields, 4)) return int_in(s.inFlight, 0, kI32Max);
                          if (k == "ackedAt" && first(fields, 8)) {
                            if (null()) return true;
                            int64_t n = 0;
                            std::string a;
                            if (peek() == '"') return string(a, 1 << 20) && (s.ackedAt = std::move(a), true);
                            return integer(n) && (s.ackedAt = std::to_string(n), true);
                          }
                          return false;
                        }) &&
                        (fields & 7) == 7 && !(s.state == ShardAssignmentState::REVOKED && s.inFlight != 0) &&
                        (add(r.revokingShards, std::move(s)), true);
               }));
      }
      if (key == "shardProgress") {
        return once(kProgress) && (null() || array([&] {
                 ShardProgress pr;
                 unsigned fields = 0;
                 return object([&](std::string_view k) {
                          if (k == "shardIndex" && first(fields, 1)) return int_in(pr.shardIndex, 0, kI32Max);
                          if (k == "lastDeliveredId" && first(fields, 2)) {
                            if (null()) return true;
                            std::string id;
                            return string(id, 64) && is_stream_id(id) && (pr.lastDeliveredId = std::move(id), true);
                          }
                          if (k == "pending" && first(fields, 4)) return optional_count(pr.pending);
                          if (k == "lag" && first(fields, 8)) return optional_count(pr.lag);
                          return false;
                        }) &&
                        (fields & 1) && (add(r.shardProgress, std::move(pr)), true);
               }));
      }
      return false;  // an unknown key: the full decoder knows what to ignore
    });
    ws();
    const unsigned required = kVersion | kRequestId | kMember | kEpoch | kMeta | kCap | kOwned;
    if (!ok || p_ != end_ || (seen & required) != required) return std::nullopt;
    // A shard is held once (owned or revoking) and reported once.
    if (!distinct(r.ownedShards, r.revokingShards) || !distinct(r.shardProgress))
      return std::nullopt;
    return r;
  }

 private:
  // Shard lists are short (a member's share of its stream's shards): the first element reserves
  // room for a few, so a usual heartbeat grows each list once, not at 1, 2 and 4 elements.
  template <typename V, typename T>
  static void add(V& v, T&& x) {
    if (v.empty()) v.reserve(4);
    v.push_back(std::forward<T>(x));
  }
  // No shard index twice across the lists: sorted on the stack for the usual few shards, on the
  // heap only past 64 (a set would allocate a node per shard).
  template <typename... Lists>
  static bool distinct(const Lists&... lists) {
    const std::size_t n = (lists.size() + ...);
    if (n < 2) return true;
    std::array<int32_t, 64> small;
    std::vector<int32_t> big;
    int32_t* out = small.data();
    if (n > small.size()) {
      big.resize(n);
      out = big.data();
    }
    std::size_t k = 0;
    auto copy = [&](const auto& list) {
      for (const auto& x : list) out[k++] = x.shardIndex;
    };
    (copy(lists), ...);
    std::sort(out, out + n);
    return std::adjacent_find(out, out + n) == out + n;
  }
  // A key may come once: false when `bit` was seen already.
  static bool first(unsigned& seen, unsigned bit) {
    if (seen & bit) return false;
    seen |= bit;
    return true;
  }
  void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  char peek() {
    ws();
    return p_ < end_ ? *p_ : '\0';
  }
  bool lit(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  bool null() {
    if (peek() != 'n' || end_ - p_ < 4 || std::string_view(p_, 4) != "null") return false;
    p_ += 4;
    return true;
  }
  // Printable ASCII without escapes only, 1..maxLen characters: a view into the body (nothing
  // is unescaped, so nothing is copied until a field keeps it).
  bool text(std::string_view& out, std::size_t maxLen) {
    if (!lit('"')) return false;
    const char* start = p_;
    while (p_ < end_ && *p_ != '"') {
      const auto c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c > 0x7e || c == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    const std::size_t n = static_cast<std::size_t>(p_ - start);
    ++p_;
    if (n == 0 || n > maxLen) return false;
    out = std::string_view(start, n);
    return true;
  }
  bool string(std::string& out, std::size_t maxLen) {
    std::string_view v;
    if (!text(v, maxLen)) return false;
    out.assign(v.data(), v.size());
    return true;
  }
  // null (nothing) or an integer in [0, int64 max].
  bool optional_count(std::optional<int64_t>& out) {
    if (null()) return true;
    int64_t n = 0;
    if (!int_in(n, 0, kI64Max)) return false;
    out = n;
    return true;
  }
  // A JSON integer that fits int64 (no fraction, no exponent, no leading zero, no "-0").
  bool integer(int64_t& out) {
    ws();
    bool neg = false;
    if (p_ < end_ && *p_ == '-') {
      neg = true;
      ++p_;
    }
    const char* start = p_;
    uint64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
      v = v * 10 + static_cast<uint64_t>(*p_ - '0');
      ++p_;
    }
    const std::size_t digits = static_cast<std::size_t>(p_ - start);
    if (digits == 0 || (digits > 1 && *start == '0') || (neg && v == 0)) return false;
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    if (neg ? v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) : v > static_cast<uint64_t>(kI64Max))
      return false;
    out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }
  template <typename T>
  bool int_in(T& out, int64_t lo, int64_t hi) {
    int64_t v = 0;
    if (!integer(v) || v < lo || v > hi) return false;
    out = static_cast<T>(v);
    return true;
  }
  // {"key": value, ...}; `member(key)` parses the value after the colon.
  template <typename F>
  bool object(F&& member) {
    if (!lit('{')) return false;
    if (lit('}')) return true;
    do {
      std::string_view key;
      if (!text(key, 64) || !lit(':') || !member(key)) return false;
    } while (lit(','));
    return lit('}');
  }
  template <typename F>
  bool array(F&& element) {
    if (!lit('[')) return false;
    if (lit(']')) return true;
    do {
      if (!element()) return false;
    } while (lit(','));
    return lit(']');
  }

  const char* p_;
  const char* end_;
  std::string_view path_;
};

}  // namespace

std::optional<HeartbeatRequest> decode_heartbeat_request_fast(std::string_view body, std::string_view pathMemberId) {
  return FastRequest(body, pathMemberId).parse();
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

Decoded<HeartbeatResponse> decode_heartbeat_response_json(const json& j) {
  return guarded<HeartbeatResponse>([&] { return parse_response(j); });
}

Decoded<HeartbeatResponse> decode_heartbeat_response(std::string_view body) {
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

json to_json(const HeartbeatRequest& r) {
  json owned = json::array();
  for (const auto& s : r.ownedShards) owned.push_back({{"shardIndex", s.shardIndex}, {"state", to_string(s.state)}});
  json revoking = json::array();
  for (const auto& s : r.revokingShards) {
    json e{{"shardIndex", s.shardIndex}, {"state", to_string(s.state)}, {"inFlight", s.inFlight}};
    e["ackedAt"] = s.ackedAt ? json(*s.ackedAt) : json(nullptr);
    revoking.push_back(std::move(e));
  }
  json progress = json::array();
  for (const auto& p : r.shardProgress) {
    json e{{"shardIndex", p.shardIndex}};
    if (p.lastDeliveredId) e["lastDeliveredId"] = *p.lastDeliveredId;
    if (p.pending) e["pending"] = *p.pending;
    e["lag"] = p.lag ? json(*p.lag) : json(nullptr);
    progress.push_back(std::move(e));
  }
  json j{{"protocolVersion", r.protocolVersion},
         {"requestId", r.requestId},
         {"memberId", r.memberId},
         {"memberEpoch", r.memberEpoch},
         {"metadataVersion", r.metadataVersion},
         {"runtimeConsumerCapacity",
          {{"runtimeMaxConcurrency", r.runtimeConsumerCapacity.runtimeMaxConcurrency},
           {"availableConcurrency", r.runtimeConsumerCapacity.availableConcurrency}}},
         {"ownedShards", std::move(owned)},
         {"revokingShards", std::move(revoking)},
         {"shardProgress", std::move(progress)}};
  if (r.leavingMemberEpoch) j["leavingMemberEpoch"] = *r.leavingMemberEpoch;
  if (r.instanceId) j["instanceId"] = *r.instanceId;
  return j;
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
std::string encode(const HeartbeatRequest& r) { return dump(to_json(r)); }
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

namespace {
void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}
void append_shard_refs(std::string& out, const std::vector<int32_t>& shards) {
  out += '[';
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (i) out += ',';
    out += "{\"shardIndex\":";
    append_int(out, shards[i]);
    out += '}';
  }
  out += ']';
}
}  // namespace

void append_response(std::string& out, const HeartbeatResponse& r) {
  out += "{\"assignment\":";
  if (r.assignment) {
    out += "{\"assignedShards\":";
    append_shard_refs(out, r.assignment->assignedShards);
    out += ",\"error\":";
    append_json_string(out, r.assignment->error);
    out += ",\"metadataVersion\":";
    append_int(out, r.assignment->metadataVersion);
    out += ",\"pendingShards\":";
    append_shard_refs(out, r.assignment->pendingShards);
    out += '}';
  } else {  // always an object: nothing assigned, nothing pending
    out += "{\"assignedShards\":[],\"error\":\"NONE\",\"metadataVersion\":";
    append_int(out, r.metadataVersion);
    out += ",\"pendingShards\":[]}";
  }
  out += ",\"assignmentEpoch\":";
  append_int(out, r.assignmentEpoch);
  if (r.errorField) {
    out += ",\"errorField\":";
    append_json_string(out, *r.errorField);
  }
  out += ",\"groupEpoch\":";
  append_int(out, r.groupEpoch);
  out += ",\"heartbeatIntervalMs\":";
  append_int(out, r.heartbeatIntervalMs);
  out += ",\"memberEpoch\":";
  append_int(out, r.memberEpoch);
  out += ",\"memberId\":";
  append_json_string(out, r.memberId);
  out += ",\"memberLeaseTtlMs\":";
  append_int(out, r.memberLeaseTtlMs);
  if (r.message) {
    out += ",\"message\":";
    append_json_string(out, *r.message);
  }
  out += ",\"metadataVersion\":";
  append_int(out, r.metadataVersion);
  out += ",\"rebalanceTimeoutMs\":";
  append_int(out, r.rebalanceTimeoutMs);
  out += ",\"responseTo\":";
  append_json_string(out, r.responseTo);
  out += ",\"status\":\"";
  out += to_string(r.status);
  out += "\"}";
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

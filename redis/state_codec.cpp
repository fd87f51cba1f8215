#include "redis/state_codec.hpp"

#include <charconv>
#include <limits>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "protocol/codec.hpp"

namespace rsc::store {
namespace {

using json = nlohmann::json;

struct Bad {
  std::string what;
};

// An integer that fits T; anything else (a float, a string, out of range) is Bad. nlohmann would
// convert a float to an integer type, which is undefined for values out of its range.
template <typename T>
T whole(const json& v, const std::string& what) {
  if (!v.is_number_integer()) throw Bad{what + " has the wrong type"};
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw Bad{what + " is out of range"};
    return static_cast<T>(u);
  }
  const auto x = v.get<int64_t>();
  if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) || x > static_cast<int64_t>(std::numeric_limits<T>::max()))
    throw Bad{what + " is out of range"};
  return static_cast<T>(x);
}


group::ShardSet shards_from(const json& j, const char* name) {
  if (!j.is_array()) throw Bad{std::string(name) + " is not an array"};
  group::ShardSet out;
  for (const auto& x : j) {
    if (!x.is_number_integer()) throw Bad{std::string(name) + " holds a non-integer"};
    out.push_back(whole<int32_t>(x, name));
  }
  return group::normalized(std::move(out));
}

template <typename T>
T get(const json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end()) throw Bad{std::string("missing \"") + k + "\""};
  if constexpr (std::is_integral_v<T>) return whole<T>(*it, std::string("\"") + k + "\"");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Bad{std::string("\"") + k + "\" has the wrong type"};
  }
}

void check_version(const json& j) {
  if (!j.is_object()) throw Bad{"not a JSON object"};
  const auto v = get<int>(j, "v");
  if (v > kFormatVersion)
    throw Bad{"format version " + std::to_string(v) + " is newer than this build reads (" +
              std::to_string(kFormatVersion) + ")"};
  if (v < 1) throw Bad{"format version " + std::to_string(v) + " is not a version"};
}

json parse(const std::string& value) {
  json j = json::parse(value, nullptr, false);
  if (j.is_discarded()) throw Bad{"not valid JSON"};
  return j;
}

}  // namespace

std::string encode_group_fields(const group::GroupState& g) {
  json j{{"v", kFormatVersion},
         {"p", g.streamPrefix},
         {"c", g.consumerGroup},
         {"ge", g.groupEpoch},
         {"ae", g.assignmentEpoch},
         {"mv", g.metadataVersion},
         {"sc", g.shardCount}};
  if (g.rollbackGuardUntilMs != 0) j["rg"] = g.rollbackGuardUntilMs;
  if (g.outageCoveredUntilMs != 0) j["oc"] = g.outageCoveredUntilMs;
  if (g.provisionedShards != 0) j["ps"] = g.provisionedShards;
  if (g.retireFrom) j["rf"] = *g.retireFrom;
  if (g.retiredBelow != 0) j["rb"] = g.retiredBelow;
  if (!g.reservations.empty()) {
    json rs = json::array();
    for (const auto& [inst, r] : g.reservations) rs.push_back(json::array({inst, r.shards, r.untilMs, r.memberId}));
    j["st"] = std::move(rs);
  }
  return protocol::dump(j);
}

// Written straight into a string (once per member per write: a steady heartbeat writes its
// member), keys in sorted order as a JSON document would have them.
std::string encode_member(const group::Member& m) {
  std::string out;
  out.reserve(m.lastResponse ? 420 : 160);
  auto num = [&](int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<std::size_t>(r.ptr - buf));
  };
  auto list = [&](const group::ShardSet& shards) {
    out += '[';
    for (std::size_t i = 0; i < shards.size(); ++i) {
      if (i) out += ',';
      num(shards[i]);
    }
    out += ']';
  };
  out += "{\"a\":";
  list(m.assigned);
  out += ",\"cap\":[";
  num(m.capacity.runtimeMaxConcurrency);
  out += ',';
  num(m.capacity.availableConcurrency);
  out += "],\"e\":";
  num(m.epoch);
  out += ",\"hb\":";
  num(m.lastHeartbeatMs);
  if (!m.instanceId.empty()) {
    out += ",\"in\":";
    protocol::append_json_string(out, m.instanceId);
  }
  if (m.leaseUntilMs != 0) {
    out += ",\"lu\":";
    num(m.leaseUntilMs);
  }
  out += ",\"pe\":";
  num(m.previousEpoch);
  if (!m.progress.empty()) {
    out += ",\"pg\":[";
    for (std::size_t i = 0; i < m.progress.size(); ++i) {
      const auto& p = m.progress[i];
      if (i) out += ',';
      out += '[';
      num(p.shardIndex);
      out += ',';
      if (p.lastDeliveredId)
        protocol::append_json_string(out, *p.lastDeliveredId);
      else
        out += "null";
      out += ',';
      if (p.pending) num(*p.pending); else out += "null";
      out += ',';
      if (p.lag) num(*p.lag); else out += "null";
      out += ']';
    }
    out += ']';
  }
  if (!m.quarantined.empty()) {
    out += ",\"q\":";
    list(m.quarantined);
    out += ",\"qu\":";
    num(m.quarantineUntilMs);
  }
  if (!m.revoking.empty()) {
    out += ",\"r\":";
    list(m.revoking);
  }
  if (m.revokeDeadlineMs != 0) {
    out += ",\"rd\":";
    num(m.revokeDeadlineMs);
  }
  if (!m.lastRequestId.empty()) {
    out += ",\"rq\":";
    protocol::append_json_string(out, m.lastRequestId);
  }
  if (m.lastResponse) {
    out += ",\"rs\":";
    protocol::append_response(out, m.lastResponse->expand(m.lastRequestId, m.id));
  }
  out += ",\"s\":\"";
  out += protocol::to_string(m.state);
  out += "\",\"t\":";
  list(m.target);
  if (m.tombstoneUntilMs != 0) {
    out += ",\"tu\":";
    num(m.tombstoneUntilMs);
  }
  out += ",\"v\":";
  num(kFormatVersion);
  out += '}';
  return out;
}

bool is_remnant(const FieldMap& fields) {
  for (const auto& [k, v] : fields)
    if (k != kRevisionField && k != kDeletedGrantsHeldField) return false;
  return true;
}

int64_t remnant_grants_held_until(const FieldMap& fields) {
  auto it = fields.find(kDeletedGrantsHeldField);
  if (it == fields.end()) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  return it->second.empty() || *end != '\0' || v < 0 ? 0 : v;
}

Result<group::GroupState> decode_group(const GroupKey& key, const FieldMap& fields) {
  using R = Result<group::GroupState>;
  const std::string where = "group " + key.str() + ": ";
  group::GroupState g;
  std::string field;
  try {
    field = kRevisionField;
    auto rev = fields.find(kRevisionField);
    if (rev == fields.end()) throw Bad{"missing"};
    try {
      std::size_t used = 0;
      g.storeRevision = std::stoll(rev->second, &used);
      if (used != rev->second.size() || g.storeRevision < 0) throw Bad{"'" + rev->second + "' is not a revision"};
    } catch (const std::logic_error&) {
      throw Bad{"'" + rev->second + "' is not a revision"};
    }
    field = kGroupField;
    auto gf = fields.find(kGroupField);
    if (gf == fields.end()) throw Bad{"missing"};
    json j = parse(gf->second);
    check_version(j);
    g.streamPrefix = get<std::string>(j, "p");
    g.consumerGroup = get<std::string>(j, "c");
    if (g.streamPrefix != key.streamPrefix || g.consumerGroup != key.consumerGroup)
      throw Bad{"belongs to " + g.streamPrefix + "/" + g.consumerGroup};
    g.groupEpoch = get<int32_t>(j, "ge");
    g.assignmentEpoch = get<int32_t>(j, "ae");
    g.metadataVersion = get<int32_t>(j, "mv");
    g.shardCount = get<int32_t>(j, "sc");
    g.rollbackGuardUntilMs = j.contains("rg") ? get<int64_t>(j, "rg") : 0;
    g.outageCoveredUntilMs = j.contains("oc") ? get<int64_t>(j, "oc") : 0;
    g.provisionedShards = j.contains("ps") ? get<int32_t>(j, "ps") : 0;
    if (j.contains("rf")) g.retireFrom = get<int32_t>(j, "rf");
    g.retiredBelow = j.contains("rb") ? get<int32_t>(j, "rb") : 0;
    if (j.contains("st")) {
      for (const auto& e : j.at("st")) {
        if (!e.is_array() || e.size() != 4 || !e[0].is_string() || !e[2].is_number_integer() || !e[3].is_string())
          throw Bad{"\"st\" entry is malformed"};
        group::GroupState::Reservation r;
        r.shards = shards_from(e[1], "st");
        r.untilMs = whole<int64_t>(e[2], "\"st\" until");
        r.memberId = e[3].get<std::string>();
        g.reservations.emplace(e[0].get<std::string>(), std::move(r));
      }
    }

    const std::string prefix = kMemberFieldPrefix;
    for (auto it = fields.lower_bound(prefix); it != fields.end() && it->first.rfind(prefix, 0) == 0; ++it) {
      field = it->first;
      json mj = parse(it->second);
      check_version(mj);
      group::Member m;
      m.id = it->first.substr(prefix.size());
      if (!protocol::valid_name(m.id)) throw Bad{"member id is not a valid name"};
      m.epoch = get<int32_t>(mj, "e");
      m.previousEpoch = get<int32_t>(mj, "pe");
      auto st = protocol::lifecycle_from(get<std::string>(mj, "s"));
      if (!st) throw Bad{"unknown lifecycle state"};
      m.state = *st;
      m.lastHeartbeatMs = get<int64_t>(mj, "hb");
      m.assigned = shards_from(mj.at("a"), "a");
      m.target = shards_from(mj.at("t"), "t");
      if (mj.contains("r")) m.revoking = shards_from(mj.at("r"), "r");
      m.revokeDeadlineMs = mj.contains("rd") ? get<int64_t>(mj, "rd") : 0;
      m.tombstoneUntilMs = mj.contains("tu") ? get<int64_t>(mj, "tu") : 0;
      m.leaseUntilMs = mj.contains("lu") ? get<int64_t>(mj, "lu") : 0;
      if (mj.contains("q")) {
        m.quarantined = shards_from(mj.at("q"), "q");
        m.quarantineUntilMs = get<int64_t>(mj, "qu");
      }
      const auto capIt = mj.find("cap");
      if (capIt == mj.end() || !capIt->is_array() || capIt->size() != 2) throw Bad{"\"cap\" must hold two numbers"};
      m.capacity = {whole<int32_t>((*capIt)[0], "\"cap\""), whole<int32_t>((*capIt)[1], "\"cap\"")};
      if (mj.contains("pg")) {
        for (const auto& p : mj.at("pg")) {
          if (!p.is_array() || p.size() != 4 || !p[0].is_number_integer()) throw Bad{"\"pg\" entry is malformed"};
          protocol::ShardProgress sp;
          sp.shardIndex = whole<int32_t>(p[0], "\"pg\" shard");
          if (p[1].is_string()) sp.lastDeliveredId = p[1].get<std::string>();
          if (p[2].is_number_integer()) sp.pending = whole<int64_t>(p[2], "\"pg\" pending");
          if (p[3].is_number_integer()) sp.lag = whole<int64_t>(p[3], "\"pg\" lag");
          m.progress.push_back(sp);
        }
      }
      m.instanceId = mj.value("in", std::string());
      if (!m.instanceId.empty() && !protocol::valid_name(m.instanceId)) throw Bad{"instance id is not a valid name"};
      m.lastRequestId = mj.value("rq", std::string());
      if (mj.contains("rs")) {
        auto d = protocol::decode_heartbeat_response_json(mj.at("rs"));
        if (!d.ok()) throw Bad{"stored response: " + d.error.message};
        m.lastResponse = group::StoredResponse::of(*d.value);
      }
      g.members.emplace(m.id, std::move(m));
    }
  } catch (const Bad& b) {
    return R::failure(ErrorKind::Corrupt, where + "field '" + field + "': " + b.what);
  } catch (const json::exception& e) {
    return R::failure(ErrorKind::Corrupt, where + "field '" + field + "': " + e.what());
  }
  return R::success(std::move(g));
}

FieldWrites field_writes(const group::GroupState& next, const group::Delta* delta) {
  FieldWrites w;
  if (delta == nullptr) {
    w.full = true;
    w.set.emplace_back(kGroupField, encode_group_fields(next));
    for (const auto& [id, m] : next.members) w.set.emplace_back(kMemberFieldPrefix + id, encode_member(m));
    return w;
  }
  if (delta->group) w.set.emplace_back(kGroupField, encode_group_fields(next));
  for (const auto& id : delta->upserted) {
    auto it = next.members.find(id);
    if (it != next.members.end()) w.set.emplace_back(kMemberFieldPrefix + id, encode_member(it->second));
  }
  for (const auto& id : delta->removed) w.del.push_back(kMemberFieldPrefix + id);
  return w;
}

}  // namespace rsc::store

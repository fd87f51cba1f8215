#include "redis/state_codec.hpp"

#include <charconv>
#include <limits>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "protocol/wire_io.hpp"

namespace rsc::store {
namespace {

using json = nlohmann::json;
namespace wire = protocol::wire;

struct Bad {
  std::string what;
};

// ---- the stored records, declared once --------------------------------------------------------
// Keys in sorted order (the writer writes them so, as a JSON document would have them); "v" is the
// format version, checked first by the general reader (check_version) before anything else.

struct Lifecycles {
  std::optional<protocol::MemberLifecycleState> operator()(std::string_view s) const { return protocol::lifecycle_from(s); }
  std::string unknown(const std::string& s) const { return "unknown lifecycle state '" + s + "'"; }
};

struct Assignors {
  std::optional<protocol::AssignorKind> operator()(std::string_view s) const { return protocol::assignor_from(s); }
  std::string unknown(const std::string& s) const { return "unknown assignor '" + s + "'"; }
};

constexpr auto kMemberFields = wire::table({
    RSC_WIRE_FIELD("a", Required),    // assigned
    RSC_WIRE_FIELD("cap", Required),  // [runtimeMaxConcurrency, availableConcurrency]
    RSC_WIRE_FIELD("e", Required),    // epoch
    RSC_WIRE_FIELD("hb", Required),   // last heartbeat
    RSC_WIRE_FIELD("in", Optional),   // instance id, static members only
    RSC_WIRE_FIELD("lu", Optional),   // lease until
    RSC_WIRE_FIELD("pe", Required),   // previous epoch
    RSC_WIRE_FIELD("pg", Optional),   // progress: [[shard, lastDeliveredId, pending, lag]]
    RSC_WIRE_FIELD("q", Optional),    // quarantined
    RSC_WIRE_FIELD("qu", Optional),   // quarantined until (with q)
    RSC_WIRE_RULE,                    // 10: q comes with qu
    RSC_WIRE_FIELD("r", Optional),    // revoking
    RSC_WIRE_FIELD("rd", Optional),   // revoke deadline
    RSC_WIRE_FIELD("rk", Optional),   // rack (zone) the member said it is in
    RSC_WIRE_FIELD("rq", Optional),   // last request id
    RSC_WIRE_FIELD("rs", Optional),   // last answer
    RSC_WIRE_FIELD("s", Required),    // lifecycle state
    RSC_WIRE_FIELD("t", Required),    // target
    RSC_WIRE_FIELD("tu", Optional),   // tombstone until
    RSC_WIRE_FIELD("v", Required),
});

constexpr auto kGroupFields = wire::table({
    RSC_WIRE_FIELD("ae", Required),  // assignment epoch
    RSC_WIRE_FIELD("as", Optional),  // assignor (absent: uniform)
    RSC_WIRE_FIELD("c", Required),   // consumer group
    RSC_WIRE_FIELD("cw", Optional),  // co-partitioned with: [stream prefix, group]
    RSC_WIRE_FIELD("ge", Required),  // group epoch
    RSC_WIRE_FIELD("mv", Required),  // metadata version
    RSC_WIRE_FIELD("oc", Optional),  // outage covered until
    RSC_WIRE_FIELD("p", Required),   // stream prefix
    RSC_WIRE_FIELD("ps", Optional),  // provisioned shards
    RSC_WIRE_FIELD("rb", Optional),  // retired below
    RSC_WIRE_FIELD("rf", Optional),  // retire from
    RSC_WIRE_FIELD("rg", Optional),  // rollback guard until
    RSC_WIRE_FIELD("sc", Required),  // shard count
    RSC_WIRE_FIELD("sr", Optional),  // shard racks (index -> rack), for the rack-aware assignor
    RSC_WIRE_FIELD("ss", Optional),  // the stream's shard racks, as of the group's metadata version
    RSC_WIRE_FIELD("st", Optional),  // static reservations: [[instance, shards, until, member]]
    RSC_WIRE_FIELD("v", Required),
});

constexpr int64_t kI32Min = wire::kI32Min, kI32Max = wire::kI32Max;
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min(), kI64Max = wire::kI64Max;

// A shard set: a list of integers, kept sorted and distinct.
template <typename V>
bool shards_io(V& v, group::ShardSet& s, bool omitEmpty) {
  auto element = [](V& e, int32_t& x) { return e.int_in(x, kI32Min, kI32Max); };
  const bool ok = omitEmpty ? v.list_or_omit(s, element) : v.list(s, element);
  if constexpr (!V::kWrites) s = group::normalized(std::move(s));
  return ok;
}

template <typename V>
bool version_io(V& f) {
  int32_t version = kFormatVersion;
  return f.int_in(version, 1, kI32Max) && f.check(version <= kFormatVersion, [&] {
    return "format version " + std::to_string(version) + " is newer than this build reads (" +
           std::to_string(kFormatVersion) + ")";
  });
}

template <typename V>
bool progress_io(V& e, protocol::ShardProgress& p) {
  return e.tuple(4, [&](V& item, std::size_t i) {
    switch (i) {
      case 0:
        return item.int_in(p.shardIndex, kI32Min, kI32Max);
      case 1:
        return item.opt_str(p.lastDeliveredId, 64);
      case 2:
        return item.opt_int(p.pending, kI64Min, kI64Max);
      default:
        return item.opt_int(p.lag, kI64Min, kI64Max);
    }
  });
}

template <typename V>
bool member_io(V& v, group::Member& m) {
  bool quarantineRead = false;
  return v.object(kMemberFields, [&](V& f, int field) {
    switch (field) {
      case 0:
        return shards_io(f, m.assigned, false);
      case 1:
        return f.tuple(2, [&](V& item, std::size_t i) {
          return i == 0 ? item.int_in(m.capacity.runtimeMaxConcurrency, kI32Min, kI32Max)
                        : item.int_in(m.capacity.availableConcurrency, kI32Min, kI32Max);
        });
      case 2:
        return f.int_in(m.epoch, kI32Min, kI32Max);
      case 3:
        return f.int_in(m.lastHeartbeatMs, kI64Min, kI64Max);
      case 4:
        return f.str_or_omit(m.instanceId, 1024) &&
               f.check(m.instanceId.empty() || protocol::valid_name(m.instanceId),
                       [] { return std::string("instance id is not a valid name"); });
      case 5:
        return f.int_unless(m.leaseUntilMs, group::Millis{0}, kI64Min, kI64Max);
      case 6:
        return f.int_in(m.previousEpoch, kI32Min, kI32Max);
      case 7:
        return f.list_or_omit(m.progress, [](V& e, protocol::ShardProgress& p) { return progress_io(e, p); });
      case 8:
        return shards_io(f, m.quarantined, true);
      case 9:
        quarantineRead = true;
        return f.int_when(!m.quarantined.empty(), m.quarantineUntilMs, kI64Min, kI64Max);
      case 10:
        return f.check_at("qu", m.quarantined.empty() || quarantineRead, [] { return std::string("is required with \"q\""); });
      case 11:
        return shards_io(f, m.revoking, true);
      case 12:
        return f.int_unless(m.revokeDeadlineMs, group::Millis{0}, kI64Min, kI64Max);
      case 13:
        return f.str_or_omit(m.rackId, 256) &&
               f.check(m.rackId.empty() || protocol::valid_name(m.rackId), [] { return std::string("rack is not a valid name"); });
      case 14:
        return f.str_or_omit(m.lastRequestId, std::size_t{1} << 20);
      case 15:
        if constexpr (V::kWrites) {
          if (!m.lastResponse) return true;
          auto answer = m.lastResponse->expand(m.lastRequestId, m.id);
          return protocol::messages::response_io(f, answer);
        } else {
          protocol::HeartbeatResponse answer;
          const bool ok = protocol::messages::response_io(f, answer);
          m.lastResponse = group::StoredResponse::of(answer);
          return ok;
        }
      case 16:
        return f.enumerated(m.state, Lifecycles{});
      case 17:
        return shards_io(f, m.target, false);
      case 18:
        return f.int_unless(m.tombstoneUntilMs, group::Millis{0}, kI64Min, kI64Max);
      default:
        return version_io(f);
    }
  });
}

// One static member's reservation: [instance, shards, until, member id].
struct ReservationRow {
  std::string instance;
  group::GroupState::Reservation r;
};

template <typename V>
bool group_io(V& v, group::GroupState& g) {
  return v.object(kGroupFields, [&](V& f, int field) {
    switch (field) {
      case 0:
        return f.int_in(g.assignmentEpoch, kI32Min, kI32Max);
      case 1:
        return f.enumerated_unless(g.assignor, protocol::AssignorKind::Uniform, Assignors{});
      case 2:
        return f.str(g.consumerGroup, 1024, 0);
      case 3: {
        std::vector<std::string> link;
        if constexpr (V::kWrites)
          if (g.coPartitionedWith) link = {g.coPartitionedWith->streamPrefix, g.coPartitionedWith->consumerGroup};
        bool ok = f.list_or_omit(link, [](V& e, std::string& name) {
          return e.str(name, 1024, 0) && e.check(protocol::valid_name(name), [] { return std::string("not a valid name"); });
        });
        if constexpr (!V::kWrites) {
          ok = ok && f.check(link.empty() || link.size() == 2, [] { return std::string("a link is [stream prefix, group]"); });
          if (ok && link.size() == 2) g.coPartitionedWith = protocol::GroupKey{link[0], link[1]};
        }
        return ok;
      }
      case 4:
        return f.int_in(g.groupEpoch, kI32Min, kI32Max);
      case 5:
        return f.int_in(g.metadataVersion, kI32Min, kI32Max);
      case 6:
        return f.int_unless(g.outageCoveredUntilMs, group::Millis{0}, kI64Min, kI64Max);
      case 7:
        return f.str(g.streamPrefix, 1024, 0);
      case 8:
        return f.int_unless(g.provisionedShards, 0, kI32Min, kI32Max);
      case 9:
        return f.int_unless(g.retiredBelow, 0, kI32Min, kI32Max);
      case 10:
        return f.opt_int(g.retireFrom, kI32Min, kI32Max);
      case 11:
        return f.int_unless(g.rollbackGuardUntilMs, group::Millis{0}, kI64Min, kI64Max);
      case 12:
        return f.int_in(g.shardCount, kI32Min, kI32Max);
      case 13:
        return f.list_or_omit(g.shardRacks, [](V& e, std::string& rack) {
          return e.str(rack, 256, 0) &&
                 e.check(rack.empty() || protocol::valid_name(rack), [] { return std::string("rack is not a valid name"); });
        });
      case 14:
        return f.list_or_omit(g.streamRacks, [](V& e, std::string& rack) {
          return e.str(rack, 256, 0) &&
                 e.check(rack.empty() || protocol::valid_name(rack), [] { return std::string("rack is not a valid name"); });
        });
      case 15: {
        std::vector<ReservationRow> rows;
        if constexpr (V::kWrites)
          for (const auto& [instance, r] : g.reservations) rows.push_back({instance, r});
        const bool ok = f.list_or_omit(rows, [](V& e, ReservationRow& row) {
          return e.tuple(4, [&](V& item, std::size_t i) {
            switch (i) {
              case 0:
                return item.str(row.instance, 1024, 0);
              case 1:
                return shards_io(item, row.r.shards, false);
              case 2:
                return item.int_in(row.r.untilMs, kI64Min, kI64Max);
              default:
                return item.str(row.r.memberId, 1024, 0);
            }
          });
        });
        if constexpr (!V::kWrites)
          for (auto& row : rows) g.reservations.emplace(std::move(row.instance), std::move(row.r));
        return ok;
      }
      default:
        return version_io(f);
    }
  });
}

template <typename T, typename Io>
std::string write(T& value, Io&& io, std::size_t reserve) {
  std::string out;
  out.reserve(reserve);
  {
    wire::Sink sink(out);
    wire::Out w(sink);
    io(w, value);
  }
  return out;
}

void check_version(const json& j) {
  if (!j.is_object()) throw Bad{"not a JSON object"};
  auto it = j.find("v");
  if (it == j.end()) throw Bad{"v: is required"};
  if (!it->is_number_integer()) throw Bad{"v: expected an integer"};
  const auto v = it->get<int64_t>();
  if (v > kFormatVersion)
    throw Bad{"format version " + std::to_string(v) + " is newer than this build reads (" +
              std::to_string(kFormatVersion) + ")"};
  if (v < 1) throw Bad{"format version " + std::to_string(v) + " is not a version"};
}

// Reads one stored record: the fast reader first (what this build writes), else the document,
// version first, with the fault named.
template <typename T, typename Io>
T read(const std::string& text, Io&& io) {
  T value{};
  {
    wire::FastIn in(text);
    if (io(in, value) && in.at_end()) return value;
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Bad{"not valid JSON"};
  check_version(j);
  value = T{};
  try {
    wire::DocIn in(j, "");
    io(in, value);
  } catch (const wire::WireInvalid& e) {
    throw Bad{e.error.message};
  }
  return value;
}

}  // namespace

std::string encode_group_fields(const group::GroupState& g) {
  return write(const_cast<group::GroupState&>(g), [](auto& w, auto& v) { return group_io(w, v); }, 160);
}

// Written straight into a string (once per member per write: a steady heartbeat writes its member).
std::string encode_member(const group::Member& m) {
  return write(const_cast<group::Member&>(m), [](auto& w, auto& v) { return member_io(w, v); },
               m.lastResponse ? 420 : 160);
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
    const auto revision = g.storeRevision;
    g = read<group::GroupState>(gf->second, [](auto& in, auto& v) { return group_io(in, v); });
    g.storeRevision = revision;
    if (g.streamPrefix != key.streamPrefix || g.consumerGroup != key.consumerGroup)
      throw Bad{"belongs to " + g.streamPrefix + "/" + g.consumerGroup};

    const std::string prefix = kMemberFieldPrefix;
    for (auto it = fields.lower_bound(prefix); it != fields.end() && it->first.rfind(prefix, 0) == 0; ++it) {
      field = it->first;
      auto m = read<group::Member>(it->second, [](auto& in, auto& v) { return member_io(in, v); });
      m.id = it->first.substr(prefix.size());
      if (!protocol::valid_name(m.id)) throw Bad{"member id is not a valid name"};
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

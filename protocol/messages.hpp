// The wire messages, each declared once: per object, its keys in the order they are checked and
// one function saying what each key holds and what must be true of it. protocol/wire_io.hpp runs
// each function three ways: the fast reader (bytes, no document), the general reader (a document,
// worded errors) and the writer. Adding a field is one row and one case.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "protocol/codec.hpp"
#include "protocol/types.hpp"
#include "protocol/wire_io.hpp"

namespace rsc::protocol::messages {

// A Redis stream entry id: "<ms>-<seq>", both decimal.
inline bool is_stream_id(const std::string& s) {
  auto dash = s.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == s.size() || s.size() > 41) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != dash && (s[i] < '0' || s[i] > '9')) return false;
  return true;
}

// ---- the heartbeat request, declared once ---------------------------------------------------
// Each object's keys in the order the general reader checks them (the version first: a later
// version may change any other field), and one function per object saying what each holds. The
// fast reader, the general reader and the writer all run these (protocol/wire_io.hpp).

struct ShardStates {  // OWNED, REVOKING, DRAINING, REVOKED
  std::optional<ShardAssignmentState> operator()(std::string_view s) const { return shard_state_from(s); }
  std::string unknown(const std::string& s) const {
    return "unknown shard state '" + s + "' (OWNED, REVOKING, DRAINING, REVOKED)";
  }
};

constexpr auto kRequestFields = wire::table({
    RSC_WIRE_FIELD("protocolVersion", Required),
    RSC_WIRE_FIELD("requestId", Required),
    RSC_WIRE_FIELD("memberId", Required),
    RSC_WIRE_FIELD("memberEpoch", Required),
    RSC_WIRE_FIELD("metadataVersion", Required),
    RSC_WIRE_FIELD("leavingMemberEpoch", Optional),
    RSC_WIRE_FIELD("instanceId", Optional),
    RSC_WIRE_RULE,  // 7: a static leave names its instance
    RSC_WIRE_FIELD("runtimeConsumerCapacity", Required),
    RSC_WIRE_FIELD("ownedShards", Required),
    RSC_WIRE_FIELD("revokingShards", Optional),
    RSC_WIRE_RULE,  // 11: a shard is held once, owned or revoking
    RSC_WIRE_FIELD("shardProgress", Optional),
    RSC_WIRE_RULE,  // 13: a shard's progress is reported once
    RSC_WIRE_FIELD("rackId", Optional),
});
constexpr auto kCapacityFields = wire::table({
    RSC_WIRE_FIELD("runtimeMaxConcurrency", Required),
    RSC_WIRE_FIELD("availableConcurrency", Required),
});
constexpr auto kOwnedFields = wire::table({
    RSC_WIRE_FIELD("shardIndex", Required),
    RSC_WIRE_FIELD("state", Optional),
});
// revokingShards and shardProgress name their shard flat, {"shardIndex": n}, or nested as other
// clients write it, {"shard": {"shardIndex": n}}; both at once must agree.
constexpr auto kShardRefFields = wire::table({
    RSC_WIRE_FIELD("shardIndex", Required),
});
constexpr auto kRevokingFields = wire::table({
    RSC_WIRE_FIELD("shardIndex", Optional),
    RSC_WIRE_FIELD("shard", Alias),
    RSC_WIRE_RULE,  // 2: the shard named once
    RSC_WIRE_FIELD("state", Required),
    RSC_WIRE_FIELD("inFlight", Required),
    RSC_WIRE_RULE,  // 5: nothing in flight once revoked
    RSC_WIRE_FIELD("ackedAt", Optional),
});
constexpr auto kProgressFields = wire::table({
    RSC_WIRE_FIELD("shardIndex", Optional),
    RSC_WIRE_FIELD("shard", Alias),
    RSC_WIRE_RULE,  // 2: the shard named once
    RSC_WIRE_FIELD("lastDeliveredId", Optional),
    RSC_WIRE_FIELD("pending", Optional),
    RSC_WIRE_FIELD("pendingCount", Alias),  // other clients' name for pending
    RSC_WIRE_RULE,               // 6: pending said once
    RSC_WIRE_FIELD("lag", Optional),
});

// The shard of a revoking or progress entry: fields 0..2 of kRevokingFields / kProgressFields.
struct ShardRef {
  bool flat = false;
  std::optional<int32_t> nested;
  template <typename V>
  bool io(V& f, int field, int32_t& shardIndex) {
    switch (field) {
      case 0:
        flat = true;
        return f.int_in(shardIndex, 0, wire::kI32Max);
      case 1: {  // never written (an alias); null is no shard
        if (f.is_null()) return true;
        int32_t s = 0;
        const bool ok = f.object(kShardRefFields, [&](V& g, int) { return g.int_in(s, 0, wire::kI32Max); });
        nested = s;
        return ok;
      }
      default:  // the rule
        if (nested) {
          if (!f.check_at("shardIndex", !flat || shardIndex == *nested,
                          [&] { return "differs from " + std::string(f_path(f)) + "shard.shardIndex"; }))
            return false;
          shardIndex = *nested;
          return true;
        }
        return f.check_at("shardIndex", flat, [] { return std::string("is required"); });
    }
  }
  template <typename V>
  static std::string f_path(V& f) {
    if constexpr (std::is_same_v<V, wire::DocIn>) return f.path().empty() ? "" : f.path() + ".";
    return "";
  }
};

template <typename V>
bool capacity_io(V& v, RuntimeConsumerCapacity& c) {
  return v.object(kCapacityFields, [&](V& f, int field) {
    return field == 0 ? f.int_in(c.runtimeMaxConcurrency, 0, wire::kI32Max)
                      : f.int_in(c.availableConcurrency, 0, wire::kI32Max);
  });
}

template <typename V>
bool owned_io(V& v, OwnedShard& s) {
  return v.object(kOwnedFields, [&](V& f, int field) {
    if (field == 0) return f.int_in(s.shardIndex, 0, wire::kI32Max);
    return f.enumerated(s.state, ShardStates{}) &&
           f.check(s.state == ShardAssignmentState::OWNED,
                   [] { return std::string("an owned shard must be OWNED; report a shard being given up in revokingShards"); });
  });
}

template <typename V>
bool revoking_io(V& v, RevokingShard& s) {
  ShardRef ref;
  return v.object(kRevokingFields, [&](V& f, int field) {
    switch (field) {
      case 0:
      case 1:
      case 2:
        return ref.io(f, field, s.shardIndex);
      case 3:
        return f.enumerated(s.state, ShardStates{}) &&
               f.check(s.state != ShardAssignmentState::OWNED,
                       [] { return std::string("a revoking shard must be REVOKING, DRAINING or REVOKED"); });
      case 4:
        return f.int_in(s.inFlight, 0, wire::kI32Max);
      case 5:
        return f.check_at("inFlight", !(s.state == ShardAssignmentState::REVOKED && s.inFlight != 0),
                          [] { return std::string("a REVOKED shard must have inFlight 0"); });
      default:
        return f.opt_str_or_int(s.ackedAt, 1 << 20);
    }
  });
}

template <typename V>
bool progress_io(V& v, ShardProgress& p) {
  ShardRef ref;
  std::optional<int64_t> pendingCount;
  return v.object(kProgressFields, [&](V& f, int field) {
    switch (field) {
      case 0:
      case 1:
      case 2:
        return ref.io(f, field, p.shardIndex);
      case 3:
        return f.opt_str(p.lastDeliveredId, 64) &&
               f.check(!p.lastDeliveredId || is_stream_id(*p.lastDeliveredId),
                       [&] { return "'" + *p.lastDeliveredId + "' is not a stream id like 1700000000000-0"; });
      case 4:
        return f.opt_int(p.pending, 0, wire::kI64Max);
      case 5:
        return f.opt_int(pendingCount, 0, wire::kI64Max);
      case 6:
        if (!pendingCount) return true;
        if (!f.check_at("pendingCount", !p.pending || *p.pending == *pendingCount, [&] {
              return "is " + std::to_string(*pendingCount) + " but pending is " + std::to_string(*p.pending);
            }))
          return false;
        p.pending = pendingCount;
        return true;
      default:
        return f.opt_int(p.lag, 0, wire::kI64Max);
    }
  });
}

inline std::string name_rule(std::string_view value) {
  return "'" + std::string(value.substr(0, 140)) + "' must match [A-Za-z0-9._:-]{1,128}";
}

// The first shard index met twice across the lists, as "<list>[i].shardIndex" (for the message).
template <typename... Lists>
std::pair<std::string, int32_t> first_repeat(const Lists&... lists) {
  std::set<int32_t> seen;
  std::pair<std::string, int32_t> found{"", -1};
  auto scan = [&](const char* name, const auto& list) {
    for (std::size_t i = 0; i < list.size() && found.second < 0; ++i)
      if (!seen.insert(list[i].shardIndex).second)
        found = {std::string(name) + "[" + std::to_string(i) + "].shardIndex", list[i].shardIndex};
  };
  (scan(lists.first, *lists.second), ...);
  return found;
}

template <typename V>
bool repeat_refused(V& f, const std::pair<std::string, int32_t>& at) {
  return f.check_at(at.first, false, [&] { return "duplicate shard " + std::to_string(at.second); });
}

template <typename V>
bool request_io(V& v, HeartbeatRequest& r, std::string_view pathMemberId) {
  return v.object(kRequestFields, [&](V& f, int field) {
    switch (field) {
      case 0:
        return f.int_in(r.protocolVersion, wire::kI32Min, wire::kI32Max) &&
               f.check(r.protocolVersion == kProtocolVersion,
                       [&] {
                         return "unsupported version " + std::to_string(r.protocolVersion) +
                                ", this coordinator speaks " + std::to_string(kProtocolVersion);
                       },
                       HeartbeatStatus::UNSUPPORTED_PROTOCOL);
      case 1:
        return f.str(r.requestId, 256);
      case 2:
        return f.str(r.memberId, 1024) && f.check(valid_name(r.memberId), [&] { return name_rule(r.memberId); }) &&
               f.check(r.memberId == pathMemberId, [&] {
                 return "body memberId '" + r.memberId + "' does not match the path memberId '" +
                        std::string(pathMemberId) + "'";
               });
      case 3:
        return f.int_in(r.memberEpoch, -2, wire::kI32Max);
      case 4:
        return f.int_in(r.metadataVersion, 0, wire::kI32Max);
      case 5:
        return f.opt_int(r.leavingMemberEpoch, 1, wire::kI32Max);
      case 6:
        return f.opt_str(r.instanceId, 1024) &&
               f.check(!r.instanceId || valid_name(*r.instanceId), [&] { return name_rule(*r.instanceId); });
      case 7:
        return f.check_at("instanceId", r.memberEpoch != -2 || r.instanceId.has_value(), [] {
          return std::string("memberEpoch -2 (leave, coming back) is for static members: send the member's instanceId");
        });
      case 8:
        return capacity_io(f, r.runtimeConsumerCapacity);
      case 9:
        return f.list(r.ownedShards, [](V& e, OwnedShard& s) { return owned_io(e, s); });
      case 10:
        return f.list(r.revokingShards, [](V& e, RevokingShard& s) { return revoking_io(e, s); }, true);
      case 11:
        if (wire::distinct_shards(r.ownedShards, r.revokingShards)) return true;
        return repeat_refused(f, first_repeat(std::pair{"ownedShards", &r.ownedShards},
                                              std::pair{"revokingShards", &r.revokingShards}));
      case 12:
        return f.list(r.shardProgress, [](V& e, ShardProgress& p) { return progress_io(e, p); }, true);
      case 13:
        if (wire::distinct_shards(r.shardProgress)) return true;
        return repeat_refused(f, first_repeat(std::pair{"shardProgress", &r.shardProgress}));
      default:
        return f.opt_str(r.rackId, 256) &&
               f.check(!r.rackId || valid_name(*r.rackId), [&] { return name_rule(*r.rackId); });
    }
  });
}


// ---- the heartbeat answer ---------------------------------------------------------------------
// Keys in sorted order, so the writer writes what dump() writes for the same document. Reading is
// lenient where other coordinators differ: responseTo, memberId, message, errorField and the
// assignment's error are taken when they are strings and otherwise ignored; a missing or null
// number is 0.

struct Statuses {
  std::optional<HeartbeatStatus> operator()(std::string_view s) const { return heartbeat_status_from(s); }
  std::string unknown(const std::string& s) const { return "unknown status '" + s + "'"; }
};

constexpr auto kAnswerFields = wire::table({
    RSC_WIRE_FIELD("assignment", Optional),
    RSC_WIRE_FIELD("assignmentEpoch", Optional),
    RSC_WIRE_FIELD("errorField", Optional),
    RSC_WIRE_FIELD("groupEpoch", Optional),
    RSC_WIRE_FIELD("heartbeatIntervalMs", Optional),
    RSC_WIRE_FIELD("memberEpoch", Optional),
    RSC_WIRE_FIELD("memberId", Optional),
    RSC_WIRE_FIELD("memberLeaseTtlMs", Optional),
    RSC_WIRE_FIELD("message", Optional),
    RSC_WIRE_FIELD("metadataVersion", Optional),
    RSC_WIRE_FIELD("rebalanceTimeoutMs", Optional),
    RSC_WIRE_FIELD("responseTo", Optional),
    RSC_WIRE_FIELD("status", Required),
});
constexpr auto kAssignmentFields = wire::table({
    RSC_WIRE_FIELD("assignedShards", Required),
    RSC_WIRE_FIELD("error", Optional),
    RSC_WIRE_FIELD("metadataVersion", Optional),
    RSC_WIRE_FIELD("pendingShards", Optional),
});

// [{"shardIndex": n}, ...]
template <typename V>
bool shard_refs_io(V& v, std::vector<int32_t>& shards, bool nullable = false) {
  return v.list(
      shards,
      [](V& e, int32_t& s) { return e.object(kShardRefFields, [&](V& f, int) { return f.int_in(s, 0, wire::kI32Max); }); },
      nullable);
}

template <typename V>
bool assignment_io(V& v, Assignment& a) {
  return v.object(kAssignmentFields, [&](V& f, int field) {
    switch (field) {
      case 0:
        return shard_refs_io(f, a.assignedShards);
      case 1:
        return f.loose_str(a.error);
      case 2:
        return f.int_or_null(a.metadataVersion, 0, wire::kI32Max);
      default:
        return shard_refs_io(f, a.pendingShards, true);
    }
  });
}

template <typename V>
bool response_io(V& v, HeartbeatResponse& r) {
  return v.object(kAnswerFields, [&](V& f, int field) {
    switch (field) {
      case 0:
        if constexpr (V::kWrites) {
          if (r.assignment) return assignment_io(f, *r.assignment);
          Assignment none;  // always an object: nothing assigned, nothing pending
          none.metadataVersion = r.metadataVersion;
          return assignment_io(f, none);
        } else {
          if (f.is_null()) return true;
          Assignment a;
          const bool ok = assignment_io(f, a);
          r.assignment = std::move(a);
          return ok;
        }
      case 1:
        return f.int_or_null(r.assignmentEpoch, 0, wire::kI32Max);
      case 2:
        return f.loose_opt_str(r.errorField);
      case 3:
        return f.int_or_null(r.groupEpoch, 0, wire::kI32Max);
      case 4:
        return f.int_or_null(r.heartbeatIntervalMs, 0, wire::kI64Max);
      case 5:
        return f.int_or_null(r.memberEpoch, -2, wire::kI32Max);
      case 6:
        return f.loose_str(r.memberId);
      case 7:
        return f.int_or_null(r.memberLeaseTtlMs, 0, wire::kI64Max);
      case 8:
        return f.loose_opt_str(r.message);
      case 9:
        return f.int_or_null(r.metadataVersion, 0, wire::kI32Max);
      case 10:
        return f.int_or_null(r.rebalanceTimeoutMs, 0, wire::kI64Max);
      case 11:
        return f.loose_str(r.responseTo);
      default:
        return f.enumerated(r.status, Statuses{});
    }
  });
}

}  // namespace rsc::protocol::messages

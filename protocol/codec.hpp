// JSON codec and request validation for the wire types (SPEC §2).
// Decoding never throws: bad input becomes a ValidationError naming the field.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/types.hpp"

namespace rsc::protocol {

template <typename T>
struct Decoded {
  std::optional<T> value;
  ValidationError error;
  // On a failure of a body that parsed as an object: its "requestId" when that is a string, so an
  // error answer can name the request without parsing the body a second time.
  std::string requestId;
  bool ok() const { return value.has_value(); }
};

// JSON bodies nested deeper than this are refused while they are parsed (a body of a million
// '[' costs its bytes' worth of scanning, never a million-level document).
inline constexpr int kMaxJsonDepth = 32;

// memberId, consumerGroup and streamPrefix: [A-Za-z0-9._:-]{1,128}.
bool valid_name(std::string_view s);
std::optional<ValidationError> validate_name(std::string_view field, std::string_view value);

// Parses and statically validates a heartbeat body. `pathMemberId` is the {memberId} of the URL.
// Rules that need the group (shard range, an epoch never issued) are checked by the group core.
Decoded<HeartbeatRequest> decode_heartbeat_request(std::string_view body, std::string_view pathMemberId);
Decoded<HeartbeatRequest> decode_heartbeat_request_json(const nlohmann::json& j, std::string_view pathMemberId);
// decode_heartbeat_request's fast path alone: the request when the body has the usual shape (known
// keys once each, integers, printable ASCII strings without escapes) and is valid; nullopt for
// anything else, which the full decoder then judges. Exposed for tests and the fuzzer, which
// check that it never accepts what the full decoder refuses nor decodes anything differently.
std::optional<HeartbeatRequest> decode_heartbeat_request_fast(std::string_view body, std::string_view pathMemberId);
Decoded<HeartbeatResponse> decode_heartbeat_response(std::string_view body);
// decode_heartbeat_response's fast path alone, as decode_heartbeat_request_fast (for tests and the fuzzer).
std::optional<HeartbeatResponse> decode_heartbeat_response_fast(std::string_view body);
Decoded<HeartbeatResponse> decode_heartbeat_response_json(const nlohmann::json& j);
// {"shardCount": N} with 1 <= N <= kMaxShardCount.
Decoded<int32_t> decode_shard_count_body(std::string_view body);
// A PUT body ({"shardCount": N, "keyStyle"?}) or, with `post`, a POST body
// ({"initialShardCount"?: N, "keyStyle"?, "requestedBy"?, "reason"?}); both may carry "retention"
// (the decode_retention_body object).
Decoded<StreamRequest> decode_stream_request(std::string_view body, bool post);
// POST .../scale: {"targetShardCount": N (0..kMaxShardCount), "requestedBy", "reason"}; with
// `rollback` no count is read and an empty body is fine.
Decoded<ScaleRequest> decode_scale_request(std::string_view body, bool rollback);
Decoded<StreamMetadata> decode_stream_metadata(std::string_view body);
// {"policy": "none" | "maxLen" | "maxAgeMs" | "processedByAllGroups", "value"?: N}: maxLen needs
// N >= 1 records per shard, maxAgeMs N >= kMinRetentionAgeMs; the others take no value.
Decoded<Retention> decode_retention_body(std::string_view body);
nlohmann::json to_json(const Retention& r);

// A Redis stream entry id: "<ms>-<seq>", both decimal.
bool valid_stream_id(const std::string& s);
// Where a reset of a group's offsets puts it on every shard, as XGROUP SETID takes it: "earliest"
// ("0": every record is delivered again), "latest" ("$": only records added from now), an entry id
// (delivery resumes after it), or a time in ms since the epoch (delivery resumes at the first
// record added at or after it). nullopt: none of those.
std::optional<std::string> reset_position(const std::string& to);

// POST .../reset-offsets: {"to": "earliest" | "latest" | an entry id | a time in ms,
// "fenceMembers"?: bool}. `position` is reset_position(to).
struct OffsetsResetRequest {
  std::string to, position;
  bool fenceMembers = false;
};
Decoded<OffsetsResetRequest> decode_reset_offsets_request(std::string_view body);

// PUT .../groups/{group}: {"assignor": "uniform" | "range" | "rack-aware" | "external", "shardRacks": [rack per
// shard index]} (shardRacks optional: absent keeps the group's, [] clears them; at most
// kMaxShardRacks, each "" for none or a name). Unknown fields are refused.
inline constexpr std::size_t kMaxShardRacks = 100000;
// PUT .../streams/{prefix}/racks: {"shardRacks": [rack per shard index]} ([] clears them) or
// {"from": "cluster-node-zone"}. Unknown fields are refused.
Decoded<StreamRacksRequest> decode_stream_racks(std::string_view body);
Decoded<GroupConfig> decode_group_config(std::string_view body);

// PUT .../groups/{group}/target: {"groupEpoch": n, "targetAssignment": {"member": [shard, ...]}}
// (the shape describe's targetAssignment has). Unknown fields are refused; what the shards and
// members must be is the group's to judge (group::set_target).
inline constexpr std::size_t kMaxTargetMembers = 100000;
Decoded<PostedTarget> decode_posted_target(std::string_view body);

// POST .../dead-letters/redrive and .../discard: {"deadLetterIds": [entry ids]} (at most
// kMaxDeadLettersPerCall) or {"all": true}, one of the two.
inline constexpr std::size_t kMaxDeadLettersPerCall = 1000;
struct DeadLetterSelection {
  std::vector<std::string> ids;
  bool all = false;
};
Decoded<DeadLetterSelection> decode_dead_letter_selection(std::string_view body);

inline constexpr int32_t kMaxShardCount = 65536;

nlohmann::json to_json(const StreamMetadata& m);
nlohmann::json to_json(const Migration& m);
// A time in ms since the epoch as "2026-12-02T06:00:00.123Z".
std::string iso8601_ms(int64_t ms);
// Serializes without throwing (invalid UTF-8 is replaced).
std::string dump(const nlohmann::json& j);
std::string encode(const HeartbeatRequest& r);
// The one encoder of an answer: compact JSON with its keys sorted, as dump() writes a document
// (dump(json::parse(encode(r))) == encode(r)), written straight into a string.
std::string encode(const HeartbeatResponse& r);
// Appends a JSON string literal (escaped as dump() escapes it) or a whole response.
void append_json_string(std::string& out, std::string_view v);
void append_response(std::string& out, const HeartbeatResponse& r);
std::string encode(const StreamMetadata& m);

// The error body shape of SPEC §2: the response shape with status and message set, and the field
// at fault when one is (errorField).
HeartbeatResponse error_response(std::string_view requestId, std::string_view memberId, HeartbeatStatus status,
                                  std::string message, std::string field = {});

// The one builder of refused heartbeat answers (RETRY, INVALID_REQUEST, an authorization
// failure...), wherever they are decided: the error shape with every timing filled in, and the
// member's epoch echoed when it is known (a RETRY leaves the member where it is).
HeartbeatResponse refusal(std::string_view requestId, std::string_view memberId, HeartbeatStatus status,
                          std::string message, const Timings& timings, std::string field = {},
                          std::optional<int32_t> memberEpoch = std::nullopt);

}  // namespace rsc::protocol

// libFuzzer: the heartbeat request and response decoders and the small bodies. Whatever the bytes,
// an answer (a value or a validation error), never a crash (the stream racks body too); a decoded request encodes again; an answer
// is written as dump() writes a document and reads back to the same bytes; the
// request and answer decoders' fast paths agree with the full decoders whenever they decide.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "protocol/codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // The fast path accepts only what the full decoder accepts, and decodes it the same.
  if (auto fast = rsc::protocol::decode_heartbeat_request_fast(body, "member-a")) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    const auto full = rsc::protocol::decode_heartbeat_request_json(doc, "member-a");
    if (doc.is_discarded() || !full.ok() || *full.value != *fast) __builtin_trap();
  }
  auto req = rsc::protocol::decode_heartbeat_request(body, "member-a");
  if (req.ok()) {
    const auto again = rsc::protocol::decode_heartbeat_request(rsc::protocol::encode(*req.value), "member-a");
    if (!again.ok()) __builtin_trap();  // what we decoded, encoded, must decode
  }
  // The same for the answer's fast reader.
  if (auto fast = rsc::protocol::decode_heartbeat_response_fast(body)) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    const auto full = rsc::protocol::decode_heartbeat_response_json(doc);
    if (doc.is_discarded() || !full.ok() || *full.value != *fast) __builtin_trap();
  }
  auto resp = rsc::protocol::decode_heartbeat_response(body);
  if (resp.ok()) {  // an answer is written as dump() writes a document, and what is written reads
                    // back to an answer written the same (the writer always writes an assignment)
    const auto bytes = rsc::protocol::encode(*resp.value);
    if (bytes != rsc::protocol::dump(nlohmann::json::parse(bytes))) __builtin_trap();
    const auto back = rsc::protocol::decode_heartbeat_response(bytes);
    if (!back.ok() || rsc::protocol::encode(*back.value) != bytes) __builtin_trap();
  }
  (void)rsc::protocol::decode_shard_count_body(body);
  (void)rsc::protocol::decode_stream_metadata(body);
  if (auto racks = rsc::protocol::decode_stream_racks(body); racks.ok()) {  // every rack taken is "" or a name
    if (racks.value->fromClusterZones && !racks.value->shardRacks.empty()) __builtin_trap();
    for (const auto& r : racks.value->shardRacks)
      if (!r.empty() && !rsc::protocol::valid_name(r)) __builtin_trap();
  }
  return 0;
}

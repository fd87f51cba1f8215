// libFuzzer: the stored group as Redis hands it back (the fields of the state hash). A corrupt or
// foreign value is a clear store error, never a crash; what decodes re-encodes and decodes equal.
#include <cstddef>
#include <cstdint>
#include <string>

#include "redis/state_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  // Input: field NUL value NUL field NUL value ...
  const std::string in(reinterpret_cast<const char*>(data), size);
  rsc::store::FieldMap fields;
  std::size_t p = 0;
  while (p < in.size()) {
    const auto a = in.find('\0', p);
    const std::string field = in.substr(p, a == std::string::npos ? std::string::npos : a - p);
    if (a == std::string::npos) break;
    const auto b = in.find('\0', a + 1);
    fields[field] = in.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    if (b == std::string::npos) break;
    p = b + 1;
  }
  const rsc::store::GroupKey key{"orders", "billing"};
  auto g = rsc::store::decode_group(key, fields);
  if (!g.ok()) {
    if (g.error.message.empty()) __builtin_trap();
    return 0;
  }
  rsc::store::FieldMap again{{rsc::store::kRevisionField, std::to_string(g.value->storeRevision)},
                             {rsc::store::kGroupField, rsc::store::encode_group_fields(*g.value)}};
  for (const auto& [id, m] : g.value->members) again[rsc::store::kMemberFieldPrefix + id] = rsc::store::encode_member(m);
  auto back = rsc::store::decode_group(key, again);
  if (!back.ok() || back.value->members.size() != g.value->members.size()) __builtin_trap();
  return 0;
}

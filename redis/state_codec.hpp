// The stored form of a group (SPEC §4): one Redis hash per group with
//   rev       storeRevision (an integer, maintained by the CAS script)
//   g         the group's own fields, JSON, with a format version "v"
//   m:<id>    one member, compact JSON, with "v"
// so a steady heartbeat rewrites one small field. Readers reject a newer "v" with a clear error;
// a later layout change reads old versions here.
#pragma once

#include <map>
#include <string>

#include "group/state.hpp"
#include "redis/store.hpp"

namespace rsc::store {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kRevisionField = "rev";
inline constexpr const char* kGroupField = "g";
inline constexpr const char* kMemberFieldPrefix = "m:";

std::string encode_group_fields(const group::GroupState& g);
std::string encode_member(const group::Member& m);

// Field name -> value, as HGETALL returns them.
using FieldMap = std::map<std::string, std::string>;
// Corrupt errors name the field and say what is wrong with it.
Result<group::GroupState> decode_group(const GroupKey& key, const FieldMap& fields);

}  // namespace rsc::store

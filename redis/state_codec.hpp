// The stored form of a group (SPEC §4): one Redis hash per group with
//   rev       storeRevision (an integer, maintained by the CAS script)
//   g         the group's own fields, JSON, with a format version "v"
//   m:<id>    one member, compact JSON, with "v"
// so a steady heartbeat rewrites one small field. Readers reject a newer "v" with a clear error;
// a later layout change reads old versions here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "group/state.hpp"
#include "redis/store.hpp"

namespace rsc::store {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kRevisionField = "rev";
inline constexpr const char* kGroupField = "g";
// Beside the revision in what a deleted group leaves: no fresh grants before this (store clock ms).
inline constexpr const char* kDeletedGrantsHeldField = "dg";

inline constexpr const char* kMemberFieldPrefix = "m:";

std::string encode_group_fields(const group::GroupState& g);
std::string encode_member(const group::Member& m);

// Field name -> value, as HGETALL returns them.
using FieldMap = std::map<std::string, std::string>;
// A group that was never written, or was deleted (only its revision and grant hold remain).
bool is_remnant(const FieldMap& fields);
// The grant hold a deleted group left (0: none or unreadable).
int64_t remnant_grants_held_until(const FieldMap& fields);
// Corrupt errors name the field and say what is wrong with it.
Result<group::GroupState> decode_group(const GroupKey& key, const FieldMap& fields);

// Builds the field writes of one CAS (shared by both stores): the fields to set and to delete.
struct FieldWrites {
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> del;
  bool full = false;  // replace the whole hash
};
FieldWrites field_writes(const group::GroupState& next, const group::Delta* delta);

}  // namespace rsc::store

// A message's fields written down once, read and written three ways.
//
// A message (the heartbeat request, a stored member record) is described by one function over an
// IO object `v`, e.g.
//
//   template <class V> bool capacity_io(V& v, RuntimeConsumerCapacity& c) {
//     return v.object(kCapacityFields, [&](V& f, int field) {
//       switch (field) {
//         case 0: return f.int_in(c.runtimeMaxConcurrency, 0, kI32Max);
//         case 1: return f.int_in(c.availableConcurrency, 0, kI32Max);
//       }
//       return true;
//     });
//   }
//
// with a table naming the object's keys in the order they are checked. The same function is run by
//   - FastIn:  reads the bytes of a body in one pass, no document; gives up (false) on anything
//              unusual (an escape, a float, an unknown or repeated key, any invalid value);
//   - DocIn:   reads nlohmann's document in the table's order and says what is wrong, naming the
//              field (throws WireInvalid); keys it does not know are ignored;
//   - Out:     writes compact JSON in the table's order, leaving out absent optional values, aliases
//              and rules.
// So a field is added, renamed or bounded in one place, and the fast and the general decoders
// cannot drift apart: they run the same rules. The wording of an error exists only in DocIn's path.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/codec.hpp"
#include "protocol/types.hpp"

namespace rsc::protocol::wire {

using json = nlohmann::json;

inline constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
inline constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

enum class Kind : uint8_t {
  Required,  // must be present (null counts as present: its reader then refuses it)
  Optional,  // may be absent
  Alias,     // read when present, never written (another client's spelling of a field)
  Rule,      // no key: a check over the fields read so far (run last by FastIn, in order by DocIn)
};
struct Field {
  std::string_view key;
  Kind kind;
};

// Thrown by DocIn only; the decode entry points catch it.
struct WireInvalid {
  ValidationError error;
};
[[noreturn]] inline void wire_fail(const std::string& field, const std::string& what,
                                   HeartbeatStatus status = HeartbeatStatus::INVALID_REQUEST) {
  throw WireInvalid{{status, field, field.empty() ? what : field + ": " + what}};
}

inline std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "non-integer number";
  return j.type_name();
}
inline std::string join(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// No shard index twice across the lists (elements with a shardIndex): sorted on the stack for the
// usual few shards, on the heap only past 64.
template <typename... Lists>
bool distinct_shards(const Lists&... lists) {
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

inline void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

// ---- FastIn -----------------------------------------------------------------------------------
class FastIn {
 public:
  static constexpr bool kWrites = false;
  explicit FastIn(std::string_view body) : p_(body.data()), end_(body.data() + body.size()) {}
  bool at_end() {
    ws();
    return p_ == end_;
  }

  template <std::size_t N, typename F>
  bool object(const Field (&fields)[N], F&& field) {
    static_assert(N <= 32, "a seen-mask bit per field");
    if (!lit('{')) return false;
    uint32_t seen = 0;
    if (!lit('}')) {
      do {
        std::string_view key;
        if (!text(key, 64) || !lit(':')) return false;
        std::size_t i = 0;
        while (i < N && (fields[i].kind == Kind::Rule || fields[i].key != key)) ++i;
        if (i == N || (seen & (1u << i))) return false;  // unknown or repeated: the general reader decides
        seen |= 1u << i;
        if (!field(*this, static_cast<int>(i))) return false;
      } while (lit(','));
      if (!lit('}')) return false;
    }
    for (std::size_t i = 0; i < N; ++i) {
      if (fields[i].kind == Kind::Required && !(seen & (1u << i))) return false;
      if (fields[i].kind == Kind::Rule && !field(*this, static_cast<int>(i))) return false;
    }
    return true;
  }
  template <typename T, typename F>
  bool list(std::vector<T>& out, F&& element, bool nullable = false) {
    if (nullable && null()) return true;
    if (!lit('[')) return false;
    if (lit(']')) return true;
    do {
      T x{};
      if (!element(*this, x)) return false;
      if (out.empty()) out.reserve(4);  // a usual heartbeat grows each list once
      out.push_back(std::move(x));
    } while (lit(','));
    return lit(']');
  }
  template <typename T>
  bool int_in(T& out, int64_t lo, int64_t hi) {
    int64_t v = 0;
    if (!integer(v) || v < lo || v > hi) return false;
    out = static_cast<T>(v);
    return true;
  }
  template <typename T>
  bool opt_int(std::optional<T>& out, int64_t lo, int64_t hi) {
    if (null()) return true;
    T v{};
    if (!int_in(v, lo, hi)) return false;
    out = v;
    return true;
  }
  bool str(std::string& out, std::size_t maxLen) {
    std::string_view v;
    if (!text(v, maxLen)) return false;
    out.assign(v.data(), v.size());
    return true;
  }
  bool opt_str(std::optional<std::string>& out, std::size_t maxLen) {
    if (null()) return true;
    std::string s;
    if (!str(s, maxLen)) return false;
    out = std::move(s);
    return true;
  }
  // null, a string, or an integer kept as its decimal text.
  bool opt_str_or_int(std::optional<std::string>& out, std::size_t maxLen) {
    if (null()) return true;
    if (peek() == '"') return opt_str(out, maxLen);
    int64_t n = 0;
    if (!integer(n)) return false;
    out = std::to_string(n);
    return true;
  }
  template <typename E, typename From>
  bool enumerated(E& out, From&& from) {
    std::string_view s;
    if (!text(s, 32)) return false;
    auto e = from(s);
    if (!e) return false;
    out = *e;
    return true;
  }
  template <typename M>
  bool check(bool ok, M&&, HeartbeatStatus = HeartbeatStatus::INVALID_REQUEST) { return ok; }
  template <typename M>
  bool check_at(std::string_view, bool ok, M&&) { return ok; }
  // Takes a null here (true), or leaves the value to be read.
  bool is_null() { return null(); }

 private:
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
  // Printable ASCII without escapes only, 1..maxLen characters: a view into the body.
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
    if (v > static_cast<uint64_t>(kI64Max)) return false;
    out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }

  const char* p_;
  const char* end_;
};

// ---- DocIn ------------------------------------------------------------------------------------
class DocIn {
 public:
  static constexpr bool kWrites = false;
  DocIn(const json& j, std::string path) : j_(&j), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  template <std::size_t N, typename F>
  bool object(const Field (&fields)[N], F&& field) {
    if (!j_->is_object()) wire_fail(path_, "expected an object, got " + type_name(*j_));
    for (std::size_t i = 0; i < N; ++i) {
      if (fields[i].kind == Kind::Rule) {
        field(*this, static_cast<int>(i));
        continue;
      }
      auto it = j_->find(fields[i].key);
      if (it == j_->end()) {
        if (fields[i].kind == Kind::Required) wire_fail(join(path_, fields[i].key), "is required");
        continue;
      }
      DocIn sub(*it, join(path_, fields[i].key));
      field(sub, static_cast<int>(i));
    }
    return true;
  }
  template <typename T, typename F>
  bool list(std::vector<T>& out, F&& element, bool nullable = false) {
    if (nullable && j_->is_null()) return true;
    if (!j_->is_array()) wire_fail(path_, "expected an array, got " + type_name(*j_));
    for (std::size_t i = 0; i < j_->size(); ++i) {
      DocIn sub((*j_)[i], path_ + "[" + std::to_string(i) + "]");
      T x{};
      element(sub, x);
      out.push_back(std::move(x));
    }
    return true;
  }
  template <typename T>
  bool int_in(T& out, int64_t lo, int64_t hi) {
    const json& v = *j_;
    if (!v.is_number_integer()) wire_fail(path_, "expected an integer, got " + type_name(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      wire_fail(path_, "must be at most " + std::to_string(hi));
    const int64_t x = v.get<int64_t>();
    if (x < lo) wire_fail(path_, "must be at least " + std::to_string(lo));
    if (x > hi) wire_fail(path_, "must be at most " + std::to_string(hi));
    out = static_cast<T>(x);
    return true;
  }
  template <typename T>
  bool opt_int(std::optional<T>& out, int64_t lo, int64_t hi) {
    if (j_->is_null()) return true;
    T v{};
    int_in(v, lo, hi);
    out = v;
    return true;
  }
  bool str(std::string& out, std::size_t maxLen) {
    if (!j_->is_string()) wire_fail(path_, "expected a string, got " + type_name(*j_));
    const auto& s = j_->get_ref<const std::string&>();
    if (s.empty()) wire_fail(path_, "must not be empty");
    if (s.size() > maxLen) wire_fail(path_, "must be at most " + std::to_string(maxLen) + " characters");
    out = s;
    return true;
  }
  bool opt_str(std::optional<std::string>& out, std::size_t maxLen) {
    if (j_->is_null()) return true;
    std::string s;
    str(s, maxLen);
    out = std::move(s);
    return true;
  }
  bool opt_str_or_int(std::optional<std::string>& out, std::size_t /*maxLen*/) {
    if (j_->is_null()) return true;
    if (j_->is_string())
      out = j_->get<std::string>();
    else if (j_->is_number_integer())
      out = std::to_string(j_->get<int64_t>());
    else
      wire_fail(path_, "expected null, a string or an integer, got " + type_name(*j_));
    return true;
  }
  // `From` names what it knows in its failure: from(s) is nullopt for an unknown spelling.
  template <typename E, typename From>
  bool enumerated(E& out, From&& from) {
    if (!j_->is_string()) wire_fail(path_, "expected a string, got " + type_name(*j_));
    const auto& s = j_->get_ref<const std::string&>();
    auto e = from(std::string_view(s));
    if (!e) wire_fail(path_, from.unknown(s));
    out = *e;
    return true;
  }
  template <typename M>
  bool check(bool ok, M&& message, HeartbeatStatus status = HeartbeatStatus::INVALID_REQUEST) {
    if (!ok) wire_fail(path_, message(), status);
    return true;
  }
  // A rule's failure, naming the field `key` of this object ("" for the object itself).
  template <typename M>
  bool check_at(std::string_view key, bool ok, M&& message) {
    if (!ok) wire_fail(key.empty() ? path_ : join(path_, key), message());
    return true;
  }
  bool is_null() const { return j_->is_null(); }

 private:
  const json* j_;
  std::string path_;
};

// ---- Out --------------------------------------------------------------------------------------
class Out {
 public:
  static constexpr bool kWrites = true;
  explicit Out(std::string& s) : s_(&s) {}

  template <std::size_t N, typename F>
  bool object(const Field (&fields)[N], F&& field) {
    begin();
    *s_ += '{';
    bool first = true;
    for (std::size_t i = 0; i < N; ++i) {
      if (fields[i].kind == Kind::Rule || fields[i].kind == Kind::Alias) continue;
      Out f(*s_, fields[i].key, &first);
      field(f, static_cast<int>(i));
    }
    *s_ += '}';
    return true;
  }
  template <typename T, typename F>
  bool list(std::vector<T>& in, F&& element, bool /*nullable*/ = false) {
    begin();
    *s_ += '[';
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (i) *s_ += ',';
      Out e(*s_);
      element(e, in[i]);
    }
    *s_ += ']';
    return true;
  }
  template <typename T>
  bool int_in(T& v, int64_t, int64_t) {
    begin();
    append_int(*s_, static_cast<int64_t>(v));
    return true;
  }
  template <typename T>
  bool opt_int(std::optional<T>& v, int64_t lo, int64_t hi) {
    return !v || int_in(*v, lo, hi);
  }
  bool str(std::string& v, std::size_t) {
    begin();
    append_json_string(*s_, v);
    return true;
  }
  bool opt_str(std::optional<std::string>& v, std::size_t maxLen) { return !v || str(*v, maxLen); }
  bool opt_str_or_int(std::optional<std::string>& v, std::size_t maxLen) { return opt_str(v, maxLen); }
  template <typename E, typename From>
  bool enumerated(E& v, From&&) {
    begin();
    *s_ += '"';
    *s_ += to_string(v);
    *s_ += '"';
    return true;
  }
  template <typename M>
  bool check(bool, M&&, HeartbeatStatus = HeartbeatStatus::INVALID_REQUEST) { return true; }
  template <typename M>
  bool check_at(std::string_view, bool, M&&) { return true; }
  bool is_null() const { return false; }

 private:
  Out(std::string& s, std::string_view key, bool* first) : s_(&s), key_(key), first_(first) {}
  // Writes this value's key (once, and only when a value is written).
  void begin() {
    if (first_ == nullptr) return;
    if (!*first_) *s_ += ',';
    *first_ = false;
    *s_ += '"';
    s_->append(key_.data(), key_.size());
    *s_ += "\":";
    first_ = nullptr;
  }
  std::string* s_;
  std::string_view key_;
  bool* first_ = nullptr;
};

}  // namespace rsc::protocol::wire

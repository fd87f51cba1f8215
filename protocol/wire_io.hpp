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
#include <cstring>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/codec.hpp"
#include "protocol/types.hpp"

// The fast reader's scanning steps are inlined into each object's reader, as one hand-written
// parser would have them.
#define RSC_WIRE_INLINE inline __attribute__((always_inline))

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
// A key's length and first and last letters in one number: the fast reader compares it before
// it compares letters.
RSC_WIRE_INLINE constexpr uint32_t key_mark(std::string_view k) {
  return k.empty() ? 0u
                   : static_cast<uint32_t>(k.size()) << 16 | static_cast<uint32_t>(static_cast<unsigned char>(k[0])) << 8 |
                         static_cast<unsigned char>(k[k.size() - 1]);
}
struct Field {
  std::string_view key;
  std::string_view quoted;  // "key": as the writer writes it
  Kind kind;
  uint32_t mark;  // key_mark(key)
};
// An object's table: its rows, and which of them are required and which are rules, as bit masks
// (an object has at most 32 rows).
template <std::size_t N>
struct Table {
  static_assert(N <= 32, "a bit per row");
  Field rows[N];
  uint32_t required = 0;
  uint32_t rules = 0;
};
template <std::size_t N, std::size_t... I>
constexpr Table<N> make_table(const Field (&rows)[N], std::index_sequence<I...>) {
  Table<N> t{{rows[I]...}};
  for (std::size_t i = 0; i < N; ++i) {
    if (rows[i].kind == Kind::Required) t.required |= 1u << i;
    if (rows[i].kind == Kind::Rule) t.rules |= 1u << i;
  }
  return t;
}
template <std::size_t N>
constexpr Table<N> table(const Field (&rows)[N]) {
  return make_table(rows, std::make_index_sequence<N>{});
}

// A table row: RSC_WIRE_FIELD("memberId", Required). A rule: RSC_WIRE_RULE.
#define RSC_WIRE_FIELD(key, kind) \
  ::rsc::protocol::wire::Field {                                                      \
    key, "\"" key "\":", ::rsc::protocol::wire::Kind::kind, ::rsc::protocol::wire::key_mark(key) \
  }
#define RSC_WIRE_RULE \
  ::rsc::protocol::wire::Field { "", "", ::rsc::protocol::wire::Kind::Rule, 0 }

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

// What both readers do alike: the writer's hints (leave out when empty or at its default) mean
// nothing to a reader, which reads the value when it is there.
template <class Reader>
class ReadsHints {
 public:
  bool str_or_omit(std::string& out, std::size_t maxLen) { return self().str(out, maxLen); }
  template <typename T>
  bool int_unless(T& out, T /*dflt*/, int64_t lo, int64_t hi) {
    return self().int_in(out, lo, hi);
  }
  template <typename T>
  bool int_when(bool /*written*/, T& out, int64_t lo, int64_t hi) {
    return self().int_in(out, lo, hi);
  }
  template <typename T, typename F>
  bool list_or_omit(std::vector<T>& out, F&& element) {
    return self().list(out, std::forward<F>(element));
  }
  template <typename E, typename From>
  bool enumerated_unless(E& out, E /*dflt*/, From&& from) {
    return self().enumerated(out, std::forward<From>(from));
  }

 private:
  Reader& self() { return static_cast<Reader&>(*this); }
};

// An integer of a document in [lo, hi], or the reason it is not one, naming `field`.
inline int64_t checked_int(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) wire_fail(field, "expected an integer, got " + type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    wire_fail(field, "must be at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo) wire_fail(field, "must be at least " + std::to_string(lo));
  if (x > hi) wire_fail(field, "must be at most " + std::to_string(hi));
  return x;
}

// ---- FastIn -----------------------------------------------------------------------------------
class FastIn : public ReadsHints<FastIn> {
 public:
  static constexpr bool kWrites = false;
  explicit FastIn(std::string_view body) : p_(body.data()), end_(body.data() + body.size()) {}
  bool at_end() {
    ws();
    return p_ == end_;
  }

  template <std::size_t N, typename F>
  bool object(const Table<N>& table, F&& field) {
    const Field* fields = table.rows;
    if (!lit('{')) return false;
    uint32_t seen = 0;
    std::size_t next = 0;
    if (!lit('}')) {
      do {
        std::string_view key;
        if (!text(key, 64) || !lit(':')) return false;
        // Keys usually come in the table's order (rsc's writer writes them so): look from the one
        // after the last found, round the table once.
        const uint32_t mark = key_mark(key);
        std::size_t i = N;
        for (std::size_t k = 0, at = next; k < N; ++k, at = at + 1 == N ? 0 : at + 1)
          if (names(fields[at], key, mark)) {
            i = at;
            break;
          }
        if (i == N || (seen & (1u << i))) return false;  // unknown or repeated: the general reader decides
        next = i + 1 == N ? 0 : i + 1;
        seen |= 1u << i;
        if (!field(*this, static_cast<int>(i))) return false;
      } while (lit(','));
      if (!lit('}')) return false;
    }
    if ((seen & table.required) != table.required) return false;
    for (uint32_t rules = table.rules; rules != 0; rules &= rules - 1)
      if (!field(*this, __builtin_ctz(rules))) return false;
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
  bool str(std::string& out, std::size_t maxLen, std::size_t minLen = 1) {
    std::string_view v;
    if (!text(v, maxLen, minLen)) return false;
    out.assign(v.data(), v.size());
    return true;
  }
  // [item 0, ..., item n-1]: exactly n items.
  template <typename F>
  bool tuple(std::size_t n, F&& item) {
    if (!lit('[')) return false;
    for (std::size_t i = 0; i < n; ++i)
      if ((i > 0 && !lit(',')) || !item(*this, i)) return false;
    return lit(']');
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
  // A string taken as it is (empty too), null leaving it as it was; anything else gives up.
  bool loose_str(std::string& out) {
    if (null()) return true;
    std::string_view v;
    if (!text(v, kLooseMax, 0)) return false;
    out.assign(v.data(), v.size());
    return true;
  }
  bool loose_opt_str(std::optional<std::string>& out) {
    if (null()) return true;
    std::string_view v;
    if (!text(v, kLooseMax, 0)) return false;
    out.emplace(v.data(), v.size());
    return true;
  }
  // null leaves the value as it was.
  template <typename T>
  bool int_or_null(T& out, int64_t lo, int64_t hi) {
    return null() || int_in(out, lo, hi);
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
  // The mark (length, first and last letters) rules out almost every other key; rules have none.
  static bool names(const Field& f, std::string_view key, uint32_t mark) {
    return f.mark == mark && std::memcmp(f.key.data(), key.data(), key.size()) == 0;
  }
  RSC_WIRE_INLINE void ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  RSC_WIRE_INLINE char peek() {
    ws();
    return p_ < end_ ? *p_ : '\0';
  }
  RSC_WIRE_INLINE bool lit(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  RSC_WIRE_INLINE bool null() {
    if (peek() != 'n' || end_ - p_ < 4 || std::string_view(p_, 4) != "null") return false;
    p_ += 4;
    return true;
  }
  static constexpr std::size_t kLooseMax = std::size_t{1} << 20;
  // Printable ASCII without escapes only, minLen..maxLen characters: a view into the body.
  RSC_WIRE_INLINE bool text(std::string_view& out, std::size_t maxLen, std::size_t minLen = 1) {
    if (!lit('"')) return false;
    const char* const start = p_;
    const char* p = p_;  // a local cursor: the loop keeps it in a register
    while (p < end_ && *p != '"') {
      const auto c = static_cast<unsigned char>(*p);
      if (c < 0x20 || c > 0x7e || c == '\\') return false;
      ++p;
    }
    if (p == end_) return false;
    const std::size_t n = static_cast<std::size_t>(p - start);
    p_ = p + 1;
    if (n < minLen || n > maxLen) return false;
    out = std::string_view(start, n);
    return true;
  }
  // A JSON integer that fits int64 (no fraction, no exponent, no leading zero, no "-0").
  RSC_WIRE_INLINE bool integer(int64_t& out) {
    ws();
    const char* p = p_;
    bool neg = false;
    if (p < end_ && *p == '-') {
      neg = true;
      ++p;
    }
    const char* start = p;
    uint64_t v = 0;
    while (p < end_ && *p >= '0' && *p <= '9') {
      if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) return false;
      v = v * 10 + static_cast<uint64_t>(*p - '0');
      ++p;
    }
    p_ = p;
    const std::size_t digits = static_cast<std::size_t>(p - start);
    if (digits == 0 || (digits > 1 && *start == '0') || (neg && v == 0)) return false;
    if (p < end_ && (*p == '.' || *p == 'e' || *p == 'E')) return false;
    if (v > static_cast<uint64_t>(kI64Max)) return false;
    out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }

  const char* p_;
  const char* end_;
};

// ---- DocIn ------------------------------------------------------------------------------------
class DocIn : public ReadsHints<DocIn> {
 public:
  static constexpr bool kWrites = false;
  DocIn(const json& j, std::string path) : j_(&j), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  template <std::size_t N, typename F>
  bool object(const Table<N>& table, F&& field) {
    const Field* fields = table.rows;
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
    out = static_cast<T>(checked_int(*j_, path_, lo, hi));
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
  bool str(std::string& out, std::size_t maxLen, std::size_t minLen = 1) {
    if (!j_->is_string()) wire_fail(path_, "expected a string, got " + type_name(*j_));
    const auto& s = j_->get_ref<const std::string&>();
    if (s.size() < minLen) wire_fail(path_, "must not be empty");
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
  bool loose_str(std::string& out) {
    if (j_->is_string()) out = j_->get<std::string>();
    return true;
  }
  template <typename F>
  bool tuple(std::size_t n, F&& item) {
    if (!j_->is_array() || j_->size() != n)
      wire_fail(path_, "expected an array of " + std::to_string(n) + ", got " +
                           (j_->is_array() ? std::to_string(j_->size()) + " items" : type_name(*j_)));
    for (std::size_t i = 0; i < n; ++i) {
      DocIn sub((*j_)[i], path_ + "[" + std::to_string(i) + "]");
      item(sub, i);
    }
    return true;
  }
  bool loose_opt_str(std::optional<std::string>& out) {
    if (j_->is_string()) out = j_->get<std::string>();
    return true;
  }
  template <typename T>
  bool int_or_null(T& out, int64_t lo, int64_t hi) {
    return j_->is_null() || int_in(out, lo, hi);
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

// ---- Out ----------------------------------------------------------------------------------
// The writer gathers its small pieces (keys, punctuation, numbers) in a buffer on the stack and
// hands them to the string in a few appends: a heartbeat's answer is written once per heartbeat.
class Sink {
 public:
  explicit Sink(std::string& s) : s_(&s) {}
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  ~Sink() { flush(); }
  void put(char c) {
    if (n_ == kCap) flush();
    buf_[n_++] = c;
  }
  void put(const char* p, std::size_t k) {
    if (k > kCap - n_) {
      flush();
      if (k > kCap) {
        s_->append(p, k);
        return;
      }
    }
    std::memcpy(buf_ + n_, p, k);
    n_ += k;
  }
  void put_int(int64_t v) {
    if (kCap - n_ < 24) flush();
    const auto r = std::to_chars(buf_ + n_, buf_ + kCap, v);
    n_ = static_cast<std::size_t>(r.ptr - buf_);
  }
  // A JSON string literal, escaped as nlohmann's dump() escapes it.
  void put_string(std::string_view v) {
    for (unsigned char c : v)
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
        flush();
        append_json_string(*s_, v);
        return;
      }
    put('"');
    put(v.data(), v.size());
    put('"');
  }
  void flush() {
    if (n_ != 0) s_->append(buf_, n_);
    n_ = 0;
  }

 private:
  static constexpr std::size_t kCap = 256;
  std::string* s_;
  char buf_[kCap];
  std::size_t n_ = 0;
};

class Out {
 public:
  static constexpr bool kWrites = true;
  explicit Out(Sink& s) : s_(&s) {}

  template <std::size_t N, typename F>
  bool object(const Table<N>& table, F&& field) {
    const Field* fields = table.rows;
    begin();
    s_->put('{');
    bool first = true;
    for (std::size_t i = 0; i < N; ++i) {
      if (fields[i].kind == Kind::Rule || fields[i].kind == Kind::Alias) continue;
      Out f(*s_, fields[i].quoted, &first);
      field(f, static_cast<int>(i));
    }
    s_->put('}');
    return true;
  }
  template <typename T, typename F>
  bool list(std::vector<T>& in, F&& element, bool /*nullable*/ = false) {
    begin();
    s_->put('[');
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (i) s_->put(',');
      Out e(*s_);
      element(e, in[i]);
    }
    s_->put(']');
    return true;
  }
  template <typename T>
  bool int_in(T& v, int64_t, int64_t) {
    begin();
    s_->put_int(static_cast<int64_t>(v));
    return true;
  }
  template <typename T>
  bool opt_int(std::optional<T>& v, int64_t lo, int64_t hi) {
    return v ? int_in(*v, lo, hi) : absent();
  }
  bool str(std::string& v, std::size_t, std::size_t = 0) {
    begin();
    s_->put_string(v);
    return true;
  }
  bool str_or_omit(std::string& v, std::size_t maxLen) { return v.empty() || str(v, maxLen); }
  template <typename T>
  bool int_unless(T& v, T dflt, int64_t lo, int64_t hi) {
    return v == dflt || int_in(v, lo, hi);
  }
  template <typename T>
  bool int_when(bool written, T& v, int64_t lo, int64_t hi) {
    return !written || int_in(v, lo, hi);
  }
  template <typename T, typename F>
  bool list_or_omit(std::vector<T>& in, F&& element) {
    return in.empty() || list(in, std::forward<F>(element));
  }
  template <typename E, typename From>
  bool enumerated_unless(E& v, E dflt, From&& from) {
    return v == dflt || enumerated(v, std::forward<From>(from));
  }
  template <typename F>
  bool tuple(std::size_t n, F&& item) {
    begin();
    s_->put('[');
    for (std::size_t i = 0; i < n; ++i) {
      if (i) s_->put(',');
      Out e(*s_);
      item(e, i);
    }
    s_->put(']');
    return true;
  }
  bool opt_str(std::optional<std::string>& v, std::size_t maxLen) { return v ? str(*v, maxLen) : absent(); }
  bool opt_str_or_int(std::optional<std::string>& v, std::size_t maxLen) { return opt_str(v, maxLen); }
  bool loose_str(std::string& v) { return str(v, 0); }
  bool loose_opt_str(std::optional<std::string>& v) { return !v || str(*v, 0); }
  template <typename T>
  bool int_or_null(T& v, int64_t lo, int64_t hi) {
    return int_in(v, lo, hi);
  }
  template <typename E, typename From>
  bool enumerated(E& v, From&&) {
    begin();
    const std::string_view name = to_string(v);  // plain ASCII
    s_->put('"');
    s_->put(name.data(), name.size());
    s_->put('"');
    return true;
  }
  template <typename M>
  bool check(bool, M&&, HeartbeatStatus = HeartbeatStatus::INVALID_REQUEST) { return true; }
  template <typename M>
  bool check_at(std::string_view, bool, M&&) { return true; }
  bool is_null() const { return false; }

 private:
  Out(Sink& s, std::string_view quotedKey, bool* first) : s_(&s), key_(quotedKey), first_(first) {}
  // An absent value: left out of an object, null in an array.
  bool absent() {
    if (key_.empty()) s_->put("null", 4);
    return true;
  }
  // Writes this value's key (once, and only when a value is written).
  void begin() {
    if (first_ == nullptr) return;
    if (!*first_) s_->put(',');
    *first_ = false;
    s_->put(key_.data(), key_.size());
    first_ = nullptr;
  }
  Sink* s_;
  std::string_view key_;  // "key":
  bool* first_ = nullptr;
};

}  // namespace rsc::protocol::wire

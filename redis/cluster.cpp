#include "redis/cluster.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "redis/keys.hpp"

namespace rsc::store::cluster {
namespace {

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<Node> parse_node(std::string_view text, const std::string& fallbackHost) {
  const auto colon = text.rfind(':');  // IPv6 hosts hold colons too: the port follows the last
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = to_int(text.substr(colon + 1));
  if (!port || *port <= 0 || *port > 65535) return std::nullopt;
  std::string host(text.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = fallbackHost;
  if (host.empty()) return std::nullopt;
  return Node{std::move(host), *port};
}

std::optional<Redirect> parse_redirect(std::string_view error, const std::string& fallbackHost) {
  Redirect r;
  if (error.rfind("MOVED ", 0) == 0) {
    r.kind = Redirect::Kind::Moved;
    error.remove_prefix(6);
  } else if (error.rfind("ASK ", 0) == 0) {
    r.kind = Redirect::Kind::Ask;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = to_int(error.substr(0, space));
  if (!slot || *slot < 0 || *slot >= kSlots) return std::nullopt;
  auto node = parse_node(error.substr(space + 1), fallbackHost);
  if (!node) return std::nullopt;
  r.slot = *slot;
  r.node = std::move(*node);
  return r;
}

uint16_t SlotMap::index_of(const Node& n) {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i] == n) return static_cast<uint16_t>(i);
  nodes_.push_back(n);
  return static_cast<uint16_t>(nodes_.size() - 1);
}

Result<SlotMap> SlotMap::from_cluster_slots(const Value& reply, const std::string& answeredBy) {
  using R = Result<SlotMap>;
  auto bad = [](const std::string& why) { return R::failure(ErrorKind::Retryable, "CLUSTER SLOTS: " + why); };
  if (reply.is_error()) return bad(reply.str);
  if (reply.type != Value::Type::Array) return bad("not an array");
  SlotMap map;
  std::vector<bool> served(kSlots, false);
  for (const auto& range : reply.elements) {
    if (range.type != Value::Type::Array || range.elements.size() < 3 ||
        range.elements[0].type != Value::Type::Integer || range.elements[1].type != Value::Type::Integer)
      return bad("a range is not [start, end, master, ...]");
    const long long from = range.elements[0].integer, to = range.elements[1].integer;
    if (from < 0 || to >= kSlots || from > to)
      return bad("range " + std::to_string(from) + "-" + std::to_string(to) + " is outside 0-16383");
    const Value& master = range.elements[2];
    if (master.type != Value::Type::Array || master.elements.size() < 2 ||
        master.elements[0].type != Value::Type::String || master.elements[1].type != Value::Type::Integer)
      return bad("a master is not [host, port, ...]");
    std::string host = master.elements[0].str;
    if (host == "?") host.clear();
    auto node = parse_node(host + ":" + std::to_string(master.elements[1].integer), answeredBy);
    if (!node) return bad("master " + master.elements[0].str + ":" + std::to_string(master.elements[1].integer) +
                          " is not an address");
    const uint16_t idx = map.index_of(*node);
    for (long long s = from; s <= to; ++s) {
      map.owner_[static_cast<std::size_t>(s)] = idx;
      served[static_cast<std::size_t>(s)] = true;
    }
  }
  for (int s = 0; s < kSlots; ++s)
    if (!served[static_cast<std::size_t>(s)]) return bad("slot " + std::to_string(s) + " is served by no node");
  return R::success(std::move(map));
}

const Node& SlotMap::node_for_key(std::string_view key) const { return node_for_slot(key_slot(key)); }

void SlotMap::moved(const Redirect& r) {
  if (r.kind != Redirect::Kind::Moved || r.slot < 0 || r.slot >= kSlots) return;
  owner_[static_cast<std::size_t>(r.slot)] = index_of(r.node);
}

std::vector<NodeBatch> group_by_node(const SlotMap& map, const std::vector<std::string>& keys) {
  std::vector<NodeBatch> out;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const Node& n = map.node_for_key(keys[i]);
    auto it = std::find_if(out.begin(), out.end(), [&](const NodeBatch& b) { return b.node == n; });
    if (it == out.end()) {
      out.push_back(NodeBatch{n, {}});
      it = out.end() - 1;
    }
    it->positions.push_back(i);
  }
  return out;
}

namespace {
bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i]))) return false;
  return true;
}
}  // namespace

std::optional<std::string> routing_key(const Command& cmd) {
  if (cmd.size() < 2) return std::nullopt;
  const std::string& name = cmd[0];
  for (const char* keyless : {"PING", "INFO", "SCRIPT", "CLUSTER", "AUTH", "ASKING", "HELLO", "CLIENT", "CONFIG",
                              "ACL", "COMMAND", "FLUSHALL", "FLUSHDB", "DBSIZE", "SELECT", "WAIT", "READONLY",
                              "READWRITE", "ECHO", "TIME", "FUNCTION", "DEBUG", "MEMORY", "SLOWLOG", "LATENCY"})
    if (iequals(name, keyless)) return std::nullopt;
  if (iequals(name, "EVAL") || iequals(name, "EVALSHA") || iequals(name, "EVAL_RO") || iequals(name, "EVALSHA_RO") ||
      iequals(name, "FCALL") || iequals(name, "FCALL_RO")) {
    if (cmd.size() < 4 || cmd[2] == "0") return std::nullopt;
    return cmd[3];
  }
  if (iequals(name, "XREAD") || iequals(name, "XREADGROUP")) {
    for (std::size_t i = 1; i + 1 < cmd.size(); ++i)
      if (iequals(cmd[i], "STREAMS")) return cmd[i + 1];
    return std::nullopt;
  }
  if (iequals(name, "XGROUP") || iequals(name, "XINFO") || iequals(name, "OBJECT")) {
    if (cmd.size() < 3) return std::nullopt;
    return cmd[2];
  }
  return cmd[1];
}

}  // namespace rsc::store::cluster

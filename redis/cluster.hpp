// Redis Cluster routing, the pure part: which node serves a key, what a
// CLUSTER SLOTS answer says about that, and what a MOVED or ASK refusal asks for. No I/O here: a
// client on hiredis keeps one connection per node and consults this to route, pipelines per node
// and follows redirects.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "redis/result.hpp"

namespace rsc::store::cluster {

inline constexpr int kSlots = 16384;

struct Node {
  std::string host;
  int port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
  friend bool operator==(const Node& a, const Node& b) { return a.host == b.host && a.port == b.port; }
  friend bool operator!=(const Node& a, const Node& b) { return !(a == b); }
};

// A node's address as Redis prints it ("127.0.0.1:7001", "::1:7001", ":7001" when the node does not
// know its own address, in which case `fallbackHost` is used). nullopt: not an address.
std::optional<Node> parse_node(std::string_view text, const std::string& fallbackHost);

// "MOVED <slot> <host:port>": the slot lives on that node now (refresh the map, send there).
// "ASK <slot> <host:port>": this once, send there preceded by ASKING (the slot is migrating).
struct Redirect {
  enum class Kind { Moved, Ask };
  Kind kind = Kind::Moved;
  int slot = 0;
  Node node;
};
// From an error reply's text; nullopt when it is no redirect. `fallbackHost`: the host of the
// connection that answered (for ":port").
std::optional<Redirect> parse_redirect(std::string_view error, const std::string& fallbackHost);

// Which master serves each slot.
class SlotMap {
 public:
  // From a CLUSTER SLOTS answer: [[start, end, [host, port, id...], replicas...], ...]. An empty
  // host (or "?") means the host of the node that answered (`answeredBy`). Fails on a malformed
  // answer or one that leaves a slot unserved (the cluster is not ready: try again).
  static Result<SlotMap> from_cluster_slots(const Value& reply, const std::string& answeredBy);

  const Node& node_for_slot(int slot) const { return nodes_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(slot)])]; }
  const Node& node_for_key(std::string_view key) const;
  // Every master, each once, in the order first seen.
  const std::vector<Node>& nodes() const { return nodes_; }
  // A MOVED refusal: the slot is that node's from now on (until the next full refresh).
  void moved(const Redirect& r);

 private:
  std::vector<Node> nodes_;
  std::array<uint16_t, kSlots> owner_{};  // index into nodes_
  uint16_t index_of(const Node& n);
};

// Commands for several keys grouped by the node that serves each, each group in the order given,
// with every command's position in the input so that replies can be put back in order.
struct NodeBatch {
  Node node;
  std::vector<std::size_t> positions;
};
std::vector<NodeBatch> group_by_node(const SlotMap& map, const std::vector<std::string>& keys);

// The key a command is routed by (its first key), or nullopt for a command with none (PING, INFO,
// SCRIPT LOAD, EVAL with no keys...), which any node may serve. Knows where the commands rsc sends
// keep their key: EVAL/EVALSHA after numkeys, XREAD/XREADGROUP after STREAMS, XGROUP/XINFO after
// the subcommand, SPUBLISH/SSUBSCRIBE the channel; otherwise the first argument.
std::optional<std::string> routing_key(const Command& cmd);


}  // namespace rsc::store::cluster

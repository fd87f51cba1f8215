#include "redis/client.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "redis/cluster.hpp"

namespace rsc::store {

using cluster::Node;
using cluster::Redirect;
using cluster::SlotMap;

std::string set_redis_nodes(RedisOptions& o, const std::string& text) {
  std::vector<Node> nodes;
  for (std::size_t from = 0;;) {
    const auto comma = text.find(',', from);
    const std::string one = text.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    auto n = cluster::parse_node(one, "");
    if (!n) return "'" + one + "' is not HOST:PORT";
    nodes.push_back(*n);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  o.host = nodes.front().host;
  o.port = nodes.front().port;
  o.seeds.clear();
  for (const auto& n : nodes) o.seeds.push_back(n.str());
  if (nodes.size() > 1) o.cluster = true;
  return {};
}

RedisClient::RedisClient(RedisOptions opts) : opts_(std::move(opts)) {
  if (!opts_.cluster) single_ = std::make_unique<RedisConnection>(opts_);
}
RedisClient::~RedisClient() = default;

void RedisClient::on_connect(std::function<std::optional<Error>(RedisConnection&)> f) {
  onConnect_ = std::move(f);
  if (single_) single_->on_connect(onConnect_);
  for (auto& [_, c] : nodes_) c->on_connect(onConnect_);
}

void RedisClient::reconnect() {
  if (single_) {
    retiredTrips_ += single_->round_trips();
    retiredCommands_ += single_->commands_sent();
    single_ = std::make_unique<RedisConnection>(opts_);
    if (onConnect_) single_->on_connect(onConnect_);
    return;
  }
  for (auto& [_, c] : nodes_) {
    retiredTrips_ += c->round_trips();
    retiredCommands_ += c->commands_sent();
  }
  nodes_.clear();
}

int64_t RedisClient::round_trips() const {
  int64_t n = retiredTrips_ + (single_ ? single_->round_trips() : 0);
  for (const auto& [_, c] : nodes_) n += c->round_trips();
  return n;
}

int64_t RedisClient::commands_sent() const {
  int64_t n = retiredCommands_ + (single_ ? single_->commands_sent() : 0);
  for (const auto& [_, c] : nodes_) n += c->commands_sent();
  return n;
}

std::vector<std::string> RedisClient::nodes() const {
  if (!opts_.cluster || !map_) return {opts_.host + ":" + std::to_string(opts_.port)};
  std::vector<std::string> out;
  for (const auto& n : map_->nodes()) out.push_back(n.str());
  return out;
}

RedisConnection& RedisClient::connection_to(const std::string& host, int port) {
  const std::string name = host + ":" + std::to_string(port);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    RedisOptions o = opts_;
    o.host = host;
    o.port = port;
    o.observer = nullptr;  // the client reports whole calls
    auto c = std::make_unique<RedisConnection>(std::move(o));
    if (onConnect_) c->on_connect(onConnect_);
    it = nodes_.emplace(name, std::move(c)).first;
  }
  return *it->second;
}

std::optional<Error> RedisClient::refresh() {
  std::vector<Node> candidates;
  if (map_) candidates = map_->nodes();
  candidates.push_back(Node{opts_.host, opts_.port});
  for (const auto& s : opts_.seeds)
    if (auto n = cluster::parse_node(s, opts_.host)) candidates.push_back(*n);
  std::vector<Node> tried;
  Error last{ErrorKind::Retryable, "no node to ask"};
  for (const auto& n : candidates) {
    if (std::find(tried.begin(), tried.end(), n) != tried.end()) continue;
    tried.push_back(n);
    auto r = connection_to(n.host, n.port).command({"CLUSTER", "SLOTS"});
    if (!r.ok()) {
      if (r.error.kind == ErrorKind::Fatal) return r.error;  // e.g. AUTH refused: no node will differ
      last = r.error;
      continue;
    }
    if (r.value->is_error() && r.value->str.find("cluster support disabled") != std::string::npos)
      return Error{ErrorKind::Fatal, "redis " + n.str() +
                                         " is not a Redis Cluster node, but cluster mode was asked for (several "
                                         "--redis nodes, or --redis-cluster)"};
    auto m = SlotMap::from_cluster_slots(*r.value, n.host);
    if (!m.ok()) {
      last = m.error;
      continue;
    }
    map_ = std::make_unique<SlotMap>(std::move(*m.value));
    stale_ = false;
    ++refreshes_;
    return std::nullopt;
  }
  return Error{ErrorKind::Retryable, "redis cluster: no node gave a slot map: " + last.message};
}

Result<RedisOptions> RedisClient::options_for_key(const std::string& key) {
  if (!opts_.cluster) return Result<RedisOptions>::success(opts_);
  if (!map_ || stale_) {
    if (auto e = refresh(); e && !map_) return Result<RedisOptions>::failure(*e);
  }
  const Node& n = map_->node_for_key(key);
  RedisOptions o = opts_;
  o.host = n.host;
  o.port = n.port;
  o.cluster = false;
  o.observer = nullptr;
  return Result<RedisOptions>::success(std::move(o));
}

std::vector<Result<Value>> RedisClient::pipeline(const std::vector<Command>& cmds) {
  if (single_) return single_->pipeline(cmds);
  const auto& obs = opts_.observer;
  const uint64_t id = obs ? obs->call_began() : 0;
  auto out = cluster_pipeline(cmds);
  if (obs) obs->call_ended(id, store_answered(out));
  return out;
}

std::vector<Result<Value>> RedisClient::cluster_pipeline(const std::vector<Command>& cmds) {
  std::vector<Result<Value>> out(cmds.size(), Result<Value>::failure(ErrorKind::Retryable, "redis cluster: not sent"));
  struct Todo {
    std::size_t pos;
    std::optional<Node> ask;  // this once, to that node after ASKING
    int redirects = 0;
  };
  std::vector<Todo> todo;
  todo.reserve(cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) todo.push_back({i, std::nullopt, 0});
  std::vector<std::optional<std::string>> keys(cmds.size());
  for (std::size_t i = 0; i < cmds.size(); ++i) keys[i] = cluster::routing_key(cmds[i]);

  const auto giveUpAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.clusterRetryBudgetMs);
  for (int round = 0; !todo.empty(); ++round) {
    if (!map_ || stale_) {
      auto e = refresh();
      if (e && (!map_ || e->kind == ErrorKind::Fatal)) {
        for (const auto& t : todo) out[t.pos] = Result<Value>::failure(*e);
        break;
      }
    }
    // One pipeline per node, each in the order asked.
    std::vector<std::pair<Node, std::vector<Todo>>> groups;
    for (auto& t : todo) {
      const Node& n = t.ask ? *t.ask : keys[t.pos] ? map_->node_for_key(*keys[t.pos]) : map_->nodes().front();
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == n; });
      if (g == groups.end()) {
        groups.emplace_back(n, std::vector<Todo>{});
        g = groups.end() - 1;
      }
      g->second.push_back(t);
    }
    std::vector<Todo> again;
    bool backoff = false;
    // Every node's pipeline is sent before any reply is read: the nodes work at the same time.
    std::vector<std::vector<std::size_t>> replyAts;  // per group: batch index -> reply index
    for (auto& [node, batch] : groups) {
      std::vector<Command> send;
      std::vector<std::size_t> replyAt;  // ASKING's own reply is skipped
      for (const auto& t : batch) {
        if (t.ask) send.push_back({"ASKING"});
        replyAt.push_back(send.size());
        send.push_back(cmds[t.pos]);
      }
      connection_to(node.host, node.port).send(send);
      replyAts.push_back(std::move(replyAt));
    }
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const auto& [node, batch] = groups[gi];
      const auto& replyAt = replyAts[gi];
      auto replies = connection_to(node.host, node.port).receive();
      for (std::size_t b = 0; b < batch.size(); ++b) {
        Todo t = batch[b];
        auto& r = replies[replyAt[b]];
        out[t.pos] = r;
        if (!r.ok()) {
          stale_ = true;  // the node may be gone: read the map again before the next command
          continue;
        }
        if (!r.value->is_error()) continue;
        if (auto rd = cluster::parse_redirect(r.value->str, node.host)) {
          ++redirects_;
          if (++t.redirects > opts_.maxRedirects) continue;  // the refusal is the answer
          if (rd->kind == Redirect::Kind::Moved) {
            map_->moved(*rd);
            stale_ = true;  // a slot moved: others probably did too (failover, resharding)
            t.ask.reset();
          } else {
            t.ask = rd->node;
          }
          again.push_back(t);
        } else if (reply_error_resent_in_cluster(r.value->str) && std::chrono::steady_clock::now() < giveUpAt) {
          t.ask.reset();
          stale_ = true;
          backoff = true;
          again.push_back(t);
        }
      }
    }
    todo = std::move(again);
    if (backoff && !todo.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(200, 10 << std::min(round, 5))));
  }
  return out;
}

Result<Value> RedisClient::command(const Command& cmd) { return pipeline({cmd}).front(); }

}  // namespace rsc::store

#include "member/producer.hpp"

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "member/bearer_token.hpp"
#include "member/producer_rules.hpp"
#include "protocol/partition.hpp"
#include "protocol/types.hpp"
#include "redis/client.hpp"

namespace rsc::member {

namespace {
int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

struct Producer::Impl {
  ProducerOptions o;
  HttpClient http;
  TokenSource token;
  store::RedisClient redis;
  RoutingFreshness freshness;
  mutable std::mutex mu;
  bool routed = false;
  bool missingStream = false;  // a write found its shard stream missing: ask producer-routing again
  int64_t retentionMaxLen = 0;  // the stream's maxLen retention, when read
  int32_t shardCount = 0, metadataVersion = 0;
  std::string pattern;
  ProducerStats stats;

  explicit Impl(ProducerOptions opts)
      : o(std::move(opts)),
        http(parse_url(o.fixedShardCount > 0 ? "http://127.0.0.1:1" : o.coordinatorUrl, nullptr), o.httpTimeoutMs,
             o.coordinatorTls),
        token{o.token, o.tokenFile},
        redis(o.redis),
        freshness(o.refreshIntervalMs) {
    if (auto e = token.load(); !e.empty()) say(e + " (read again when the coordinator refuses a call)");
  }

  // A GET to the coordinator (a rotated token file is read again on a 401: TokenSource::send).
  HttpReply get(const std::string& path) {
    return token.send([&](const std::string& t) { return http.request("GET", path, "", t); });
  }

  void say(const std::string& line) {
    if (o.log) o.log(line);
  }

  // Reads the routing; "" when read, else why not (the cached one, if any, stays).
  std::string read_routing() {
    if (o.fixedShardCount > 0) {
      routed = true;
      shardCount = stats.shardCount = o.fixedShardCount;
      pattern = o.fixedKeyPattern;
      return {};
    }
    // producer-routing makes sure every shard stream and the group's consumer groups exist (a
    // BUSYGROUP answer per shard when they do): asked first, when the layout changed, and when a
    // write found a shard stream missing. In between, the stream's metadata (one read in Redis)
    // says whether the layout changed.
    const std::string streamPath = "/coord/v1/streams/" + o.streamPrefix;
    if (routed && !missingStream && !o.group.empty()) {
      auto m = get(streamPath);
      ++stats.routingReads;
      auto j = nlohmann::json::parse(m.body, nullptr, false);
      if (m.status == 200 && j.is_object() && j.value("metadataVersion", -1) == metadataVersion) return {};
    }
    missingStream = false;
    const std::string path = o.group.empty() ? streamPath : streamPath + "/groups/" + o.group + "/producer-routing";
    auto r = get(path);
    ++stats.routingReads;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status != 200 || !j.is_object() || !j.contains("shardCount") || !j.contains("metadataVersion"))
      return "GET " + path + " answered " + (r.status == 0 ? r.error : "HTTP " + std::to_string(r.status) + " " + r.body);
    const int32_t count = j.value("shardCount", 0), version = j.value("metadataVersion", 0);
    std::string p = j.value("streamKeyPattern", std::string());
    if (p.empty()) p = protocol::stream_key_pattern(o.streamPrefix, protocol::KeyStyle::HashTag);
    if (routed && version != metadataVersion) {
      ++stats.routingChanges;
      say("producer " + o.streamPrefix + ": routing metadataVersion " + std::to_string(metadataVersion) + " -> " +
          std::to_string(version) + ", shards " + std::to_string(shardCount) + " -> " + std::to_string(count));
    }
    routed = true;
    shardCount = count;
    metadataVersion = version;
    pattern = std::move(p);
    if (o.maxLenFromRetention && o.maxLen <= 0) {
      auto rr = get(streamPath + "/retention");
      auto rj = nlohmann::json::parse(rr.body, nullptr, false);
      if (rr.status == 200 && rj.is_object() && rj.contains("retention") && rj["retention"].is_object()) {
        const auto& ret = rj["retention"];
        retentionMaxLen = ret.value("policy", std::string()) == "maxLen" ? ret.value("value", int64_t{0}) : 0;
      }
    }
    stats.shardCount = count;
    stats.metadataVersion = version;
    return {};
  }

  store::Command xadd(const ProducerRecord& r, int32_t shard) const {
    store::Command c{"XADD", protocol::expand_key_pattern(pattern, shard)};
    if (!o.createMissingStreams) c.push_back("NOMKSTREAM");
    const int64_t bound = o.maxLen > 0 ? o.maxLen : retentionMaxLen;
    if (bound > 0) c.insert(c.end(), {"MAXLEN", "~", std::to_string(bound)});
    c.push_back("*");
    for (const auto& [f, v] : r.fields) c.insert(c.end(), {f, v});
    return c;
  }
};

Producer::Producer(ProducerOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {}
Producer::~Producer() = default;

ProducerStats Producer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

SendResult Producer::send(const std::vector<ProducerRecord>& records) {
  auto& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  SendResult out;
  out.shards.assign(records.size(), -1);
  std::vector<std::size_t> todo(records.size());
  for (std::size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  const int64_t deadline = steady_ms() + m.o.retryBudgetMs;
  for (int attempt = 0; !todo.empty(); ++attempt) {
    std::string why;
    if (m.freshness.due(steady_ms())) {
      why = m.read_routing();
      if (why.empty()) m.freshness.read(steady_ms());
    }
    if (m.routed && why.empty() && m.shardCount <= 0) {
      why = "stream " + m.o.streamPrefix + " has no shards (scaled to 0)";
      m.freshness.stale();
    }
    if (m.routed && m.shardCount > 0) {
      std::vector<store::Command> cmds;
      std::vector<int32_t> shard(todo.size());
      for (std::size_t k = 0; k < todo.size(); ++k) {
        const auto& r = records[todo[k]];
        const auto n = static_cast<uint32_t>(m.shardCount);
        shard[k] = static_cast<int32_t>(m.o.partitioner == "fnv1a" ? protocol::fnv1a_shard(r.key, n)
                                                                   : protocol::murmur3_unbiased_shard(r.key, n));
        cmds.push_back(m.xadd(r, shard[k]));
      }
      auto replies = m.redis.pipeline(cmds);
      std::vector<std::size_t> failed;
      for (std::size_t k = 0; k < replies.size(); ++k) {
        const auto& r = replies[k];
        if (r.ok() && !r.value->is_error() && !r.value->is_nil()) {
          out.shards[todo[k]] = shard[k];
          ++out.written;
          ++m.stats.written;
          continue;
        }
        if (r.ok() && r.value->is_nil()) {  // NOMKSTREAM: the shard stream does not exist
          ++m.stats.refusedNoStream;
          m.freshness.stale();
          m.missingStream = true;
          if (why.empty()) why = "shard stream " + cmds[k][1] + " does not exist";
        } else if (why.empty()) {
          why = r.ok() ? r.value->str : r.error.message;
        }
        failed.push_back(todo[k]);
      }
      todo = std::move(failed);
      if (todo.empty()) break;
    }
    if (steady_ms() >= deadline) {
      out.ok = false;
      out.error = std::to_string(todo.size()) + " record(s) not written after " + std::to_string(m.o.retryBudgetMs) +
                  " ms: " + why;
      return out;
    }
    m.stats.resends += static_cast<int64_t>(todo.size());
    const int64_t wait = resend_backoff_ms(attempt + 1);
    if (attempt % 20 == 0)
      m.say("producer " + m.o.streamPrefix + ": write failed (" + why + "); retrying " + std::to_string(todo.size()) +
            " record(s) in " + std::to_string(wait) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
  }
  return out;
}

}  // namespace rsc::member

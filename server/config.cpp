#include "server/config.hpp"

#include "group/rack_zones.hpp"
#include "protocol/codec.hpp"
#include "redis/client.hpp"
#include "redis/options.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace rsc::server {
namespace {

using json = nlohmann::json;

struct Bad {
  std::string what;
};

constexpr std::size_t kMinTokenLength = 16;  // a token a caller cannot guess

// An object of string settings (file paths, names), each non-empty and each one of `fields`; any
// other name is refused with the names it may have. `also`: a name the caller reads itself.
template <typename T>
void read_string_settings(const json& obj, const std::string& path, const std::string& prefix, T& out,
                          std::initializer_list<std::pair<const char*, std::string T::*>> fields, const char* also = nullptr) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (also != nullptr && it.key() == also) continue;
    std::string T::*field = nullptr;
    std::string names;
    for (const auto& [name, f] : fields) {
      if (it.key() == name) field = f;
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    if (also != nullptr) names += std::string(", ") + also;
    if (field == nullptr) throw Bad{path + ": " + prefix + it.key() + ": unknown setting (" + names + ")"};
    if (!it->is_string() || it->get<std::string>().empty()) throw Bad{path + ": " + prefix + it.key() + " must be a non-empty string"};
    out.*field = it->get<std::string>();
  }
}

std::pair<std::string, int> host_port(const std::string& v, const std::string& name) {
  const auto colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == v.size())
    throw Bad{name + ": expected HOST:PORT, got '" + v + "'"};
  int port = 0;
  try {
    std::size_t used = 0;
    port = std::stoi(v.substr(colon + 1), &used);
    if (used != v.size() - colon - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw Bad{name + ": '" + v.substr(colon + 1) + "' is not a port"};
  }
  if (port < 0 || port > 65535) throw Bad{name + ": port " + std::to_string(port) + " is out of range"};
  std::string host = v.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, port};
}

// Settings where 0 means "off".
bool allows_zero(const std::string& key) {
  return key == "lease-renewal-slack" || key == "retired-shard-ttl" || key == "ready-store-grace";
}

int64_t positive(const std::string& v, const std::string& name, bool zeroAllowed = false) {
  try {
    std::size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument("trailing");
    if (x < 0 || (x == 0 && !zeroAllowed))
      throw Bad{name + ": must be " + (zeroAllowed ? "0 or more" : "positive") + ", got " + v};
    return x;
  } catch (const Bad&) {
    throw;
  } catch (const std::exception&) {
    throw Bad{name + ": '" + v + "' is not a number"};
  }
}

void set_listen(Config& c, const std::string& v, const std::string& name) {
  auto [h, p] = host_port(v, name);
  c.http.host = h;
  c.http.port = static_cast<uint16_t>(p);
}
void set_probe_listen(Config& c, const std::string& v, const std::string& name) {
  auto [h, p] = host_port(v, name);
  if (p == 0) throw Bad{name + ": the probe port must be a port number, not 0"};
  c.probeListen = std::make_pair(h, static_cast<uint16_t>(p));
}
void set_advertise(Config& c, const std::string& v, const std::string& name) {
  auto [h, p] = host_port(v, name);
  in_addr a4{};
  in6_addr a6{};
  // An IP address, or a DNS name that resolves to this pod (a headless Service's pod record, say,
  // which the pod's certificate can name): the other pods and rsc's clients connect to it.
  auto dns_name = [](const std::string& n) {
    if (n.empty() || n.size() > 253 || n.front() == '.' || n.back() == '.' || n.find("..") != std::string::npos) return false;
    std::size_t label = 0;
    for (std::size_t i = 0; i < n.size(); ++i) {
      const char ch = n[i];
      if (ch == '.') {
        if (n[i - 1] == '-') return false;
        label = 0;
        continue;
      }
      const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
      if (!ok || (ch == '-' && label == 0) || ++label > 63) return false;
    }
    return n.back() != '-';
  };
  if (inet_pton(AF_INET, h.c_str(), &a4) != 1 && inet_pton(AF_INET6, h.c_str(), &a6) != 1 && !dns_name(h))
    throw Bad{name + ": '" + h + "' must be an IP address or a host name (the other pods and the members connect to it)"};
  if (p == 0) throw Bad{name + ": the port must not be 0"};
  c.advertise = h + ":" + std::to_string(p);
}
void set_group_start(Config& c, const std::string& v, const std::string& name) {
  if (v != "0" && v != "$")
    throw Bad{name + ": '" + v + "' must be 0 (read a new group's streams from the start) or $ (only new records)"};
  c.service.consumerGroupStartId = v;
}
// "HOST:PORT=ZONE,...": the zone of each Redis node, for a stream's racks from the nodes' zones.
void set_node_zones(Config& c, const std::string& v, const std::string& name) {
  auto parsed = group::parse_node_zones(v);
  if (!parsed.error.empty()) throw Bad{name + ": " + parsed.error};
  c.service.redisNodeZones = std::move(parsed.zones);
}
// "HOST:PORT", or seed nodes of a Redis Cluster "HOST:PORT,HOST:PORT,..." (several mean a cluster).
void set_redis(Config& c, const std::string& v, const std::string& name) {
  if (auto e = store::set_redis_nodes(c.redis, v); !e.empty()) throw Bad{name + ": expected HOST:PORT[,HOST:PORT...]: " + e};
}
bool parse_bool(const std::string& v, const std::string& name) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  throw Bad{name + ": '" + v + "' must be true or false"};
}

void set_redis_cluster(Config& c, const std::string& v, const std::string& name) { c.redis.cluster = parse_bool(v, name); }

// Setting names shared by the file ("coordinator.tick-interval"), env and flags.
void set_number(Config& c, const std::string& key, int64_t v, const std::string& name) {
  if (key == "tick-interval") c.service.tickIntervalMs = v;
  else if (key == "heartbeat-interval") c.service.core.heartbeatIntervalMs = v;
  else if (key == "member-lease-ttl") c.service.core.memberLeaseTtlMs = v;
  else if (key == "rebalance-timeout") c.service.core.rebalanceTimeoutMs = v;
  else if (key == "lease-renewal-slack") c.leaseRenewalSlackMs = v;
  else if (key == "mutex-ttl") c.service.mutexTtlMs = v;
  else if (key == "default-shard-count") {
    if (v > 65536) throw Bad{name + ": at most 65536 shards"};
    c.service.defaultShardCount = static_cast<int32_t>(v);
  } else if (key == "store-connections") c.service.storeConnections = static_cast<int>(v);
  else if (key == "http-threads") c.http.threads = static_cast<int>(v);
  else if (key == "scheduler-threads") c.service.schedulerThreads = static_cast<int>(v);
  else if (key == "shutdown-grace") c.shutdownGraceMs = v;
  else if (key == "http-header-timeout") c.http.headerTimeoutMs = v;
  else if (key == "http-idle-timeout") c.http.idleTimeoutMs = v;
  else if (key == "max-connections") c.http.maxConnections = v;
  else if (key == "pod-lease") c.podLeaseMs = v;
  else if (key == "store-deadline") c.service.storeDeadlineMs = v;
  else if (key == "store-stall") c.service.storeStallMs = v;
  else if (key == "group-retire-after") c.service.groupRetireAfterMs = v;
  else if (key == "lag-interval") c.service.lagIntervalMs = v;
  else if (key == "scale-in-grace") c.service.scaleInGraceMs = v;
  else if (key == "retired-shard-ttl") c.service.retiredShardTtlMs = v;
  else if (key == "static-session-timeout") c.service.core.staticSessionTimeoutMs = v;
  else if (key == "max-groups-per-stream") c.service.maxGroupsPerStream = v;
  else if (key == "tls-expiry-warning-days") c.tlsExpiryWarningDays = v;
  else if (key == "ready-store-grace") c.service.readyStoreGraceMs = v;
  else throw Bad{name + ": unknown setting"};
}

const std::vector<std::string> kNumeric{"tick-interval", "heartbeat-interval", "member-lease-ttl", "rebalance-timeout",
                                        "lease-renewal-slack",
                                        "mutex-ttl", "default-shard-count", "store-connections", "http-threads",
                                        "scheduler-threads", "shutdown-grace", "http-header-timeout", "http-idle-timeout", "pod-lease",
                                        "store-deadline", "store-stall", "group-retire-after", "lag-interval", "max-groups-per-stream",
                                        "max-connections", "scale-in-grace", "retired-shard-ttl", "static-session-timeout",
                                        "tls-expiry-warning-days", "ready-store-grace"};

// Settings that are counts, not milliseconds (no _MS / -ms suffix).
bool is_count(const std::string& key) {
  return key == "default-shard-count" || key == "store-connections" || key == "http-threads" ||
         key == "scheduler-threads" ||
         key == "max-groups-per-stream" || key == "max-connections" || key == "tls-expiry-warning-days";
}

std::string env_name(const std::string& key) {
  std::string s = "RSC_";
  for (char ch : key) s += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (!is_count(key)) s += "_MS";
  return s;
}
std::string flag_name(const std::string& key) {
  if (is_count(key)) return "--" + key;
  return "--" + key + "-ms";
}

// An object's keys must all be among `known`: a typo is refused with the key's path, never
// ignored (a misspelt setting would silently keep its default, or leave a token unscoped).
void only_known(const json& obj, const std::string& path, const std::string& where,
                std::initializer_list<const char*> known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    std::string names;
    for (const char* k : known) {
      ok = ok || it.key() == k;
      names += (names.empty() ? "" : ", ") + std::string(k);
    }
    if (!ok) throw Bad{path + ": " + where + it.key() + ": unknown setting (" + names + ")"};
  }
}

// The line and column of byte `offset` (1-based) in `text`.
std::string line_and_column(const std::string& text, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

void load_file(Config& c, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Bad{"--config: cannot read " + path};
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based position of the byte that could not be read.
    throw Bad{path + ": not valid JSON at " + line_and_column(text, e.byte > 0 ? e.byte - 1 : 0) + ": " +
              std::string(e.what()).substr(std::string(e.what()).find(':') + 2)};
  } catch (const json::exception& e) {
    // Read but not representable, e.g. a number too large for a double (out_of_range 406).
    throw Bad{path + ": not usable JSON: " + std::string(e.what()).substr(std::string(e.what()).find(']') + 2)};
  }
  if (!j.is_object()) throw Bad{path + ": not a JSON object"};
  only_known(j, path, "", {"listen", "advertise", "probeListen", "podLink", "redis", "tls", "coordinator", "groups", "auth"});
  auto str = [&](const json& o, const char* k, const std::string& where) -> std::optional<std::string> {
    if (!o.contains(k)) return std::nullopt;
    if (!o[k].is_string()) throw Bad{path + ": " + where + " must be a string"};
    return o[k].get<std::string>();
  };
  if (auto v = str(j, "listen", "listen")) set_listen(c, *v, path + ": listen");
  if (auto v = str(j, "advertise", "advertise")) set_advertise(c, *v, path + ": advertise");
  if (auto v = str(j, "probeListen", "probeListen")) set_probe_listen(c, *v, path + ": probeListen");
  if (j.contains("podLink")) {
    if (!j["podLink"].is_boolean()) throw Bad{path + ": podLink must be true or false"};
    c.http.podLink = j["podLink"].get<bool>();
  }
  if (j.contains("redis")) {
    const auto& r = j["redis"];
    if (!r.is_object()) throw Bad{path + ": redis must be an object"};
    only_known(r, path, "redis.", {"address", "cluster", "user", "password", "passwordFile", "tls", "namespace", "nodeZones"});
    if (auto v = str(r, "address", "redis.address")) set_redis(c, *v, path + ": redis.address");
    if (auto v = str(r, "nodeZones", "redis.nodeZones")) set_node_zones(c, *v, path + ": redis.nodeZones");
    if (r.contains("cluster")) {
      if (!r["cluster"].is_boolean()) throw Bad{path + ": redis.cluster must be true or false"};
      c.redis.cluster = r["cluster"].get<bool>();
    }
    if (auto v = str(r, "user", "redis.user")) c.redis.user = *v;
    if (auto v = str(r, "password", "redis.password")) c.redis.password = *v;
    if (auto v = str(r, "passwordFile", "redis.passwordFile")) {
      std::string error;
      c.redis.password = store::read_secret_file(*v, error);
      if (!error.empty()) throw Bad{path + ": redis.passwordFile: " + error};
    }
    if (r.contains("tls")) {  // {"caFile", "caDir", "certFile", "keyFile", "serverName", "enabled": true}
      const auto& t = r["tls"];
      if (!t.is_object()) throw Bad{path + ": redis.tls must be an object"};
      c.redis.tls.enabled = true;
      if (t.contains("enabled")) {
        if (!t["enabled"].is_boolean()) throw Bad{path + ": redis.tls.enabled must be true or false"};
        c.redis.tls.enabled = t["enabled"].get<bool>();
      }
      using O = store::TlsOptions;
      read_string_settings<O>(t, path, "redis.tls.", c.redis.tls,
                              {{"caFile", &O::caFile}, {"caDir", &O::caDir}, {"certFile", &O::certFile},
                               {"keyFile", &O::keyFile}, {"serverName", &O::serverName}},
                              "enabled");
    }
    if (auto v = str(r, "namespace", "redis.namespace")) c.redis.ns = *v;
  }
  if (j.contains("tls")) {  // HTTPS: {"certFile", "keyFile", "clientCaFile", "peerCaFile", "peerName", "minVersion", "ciphers"}
    const auto& t = j["tls"];
    if (!t.is_object()) throw Bad{path + ": tls must be an object"};
    using S = http::ServerTls;
    read_string_settings<S>(t, path, "tls.", c.http.tls,
                            {{"certFile", &S::certFile}, {"keyFile", &S::keyFile}, {"clientCaFile", &S::clientCaFile},
                             {"peerCaFile", &S::peerCaFile}, {"peerName", &S::peerName}, {"minVersion", &S::minVersion},
                             {"ciphers", &S::ciphers}});
  }
  if (j.contains("coordinator")) {
    const auto& co = j["coordinator"];
    if (!co.is_object()) throw Bad{path + ": coordinator must be an object"};
    for (auto it = co.begin(); it != co.end(); ++it) {
      const std::string where = path + ": coordinator." + it.key();
      // The flag's spelling is taken too: "heartbeat-interval-ms" as well as "heartbeat-interval".
      std::string key = it.key();
      if (key.size() > 3 && key.compare(key.size() - 3, 3, "-ms") == 0 && !is_count(key.substr(0, key.size() - 3)) &&
          std::find(kNumeric.begin(), kNumeric.end(), key.substr(0, key.size() - 3)) != kNumeric.end())
        key.resize(key.size() - 3);
      if (key == "consumer-group-start") {
        if (!it->is_string()) throw Bad{where + " must be \"0\" or \"$\""};
        set_group_start(c, it->get<std::string>(), where);
        continue;
      }
      if (std::find(kNumeric.begin(), kNumeric.end(), key) == kNumeric.end()) {
        std::string names;
        for (const auto& k : kNumeric) names += (names.empty() ? "" : ", ") + k;
        throw Bad{where + ": unknown setting (" + names + ", consumer-group-start; each also with the flag's -ms)"};
      }
      if (!it->is_number_integer()) throw Bad{where + " must be an integer"};
      if (it->get<int64_t>() < 0 || (it->get<int64_t>() == 0 && !allows_zero(key)))
        throw Bad{where + (allows_zero(key) ? " must be 0 or more" : " must be positive")};
      set_number(c, key, it->get<int64_t>(), where);
    }
  }
  if (j.contains("groups")) {  // per-group settings: {"<prefix>/<group>": {"consumerGroupStart": "0"|"$"}}
    const auto& gs = j["groups"];
    if (!gs.is_object()) throw Bad{path + ": groups must be an object of \"<stream>/<group>\": {...}"};
    for (auto it = gs.begin(); it != gs.end(); ++it) {
      const std::string where = path + ": groups." + it.key();
      const auto slash = it.key().find('/');
      if (slash == std::string::npos || !protocol::valid_name(it.key().substr(0, slash)) ||
          !protocol::valid_name(it.key().substr(slash + 1)))
        throw Bad{where + ": the key must be <stream>/<group>, each [A-Za-z0-9._:-]{1,128}"};
      if (!it->is_object()) throw Bad{where + " must be an object"};
      for (auto f = it->begin(); f != it->end(); ++f) {
        if (f.key() != "consumerGroupStart") throw Bad{where + "." + f.key() + ": unknown setting"};
        if (!f->is_string() || (f->get<std::string>() != "0" && f->get<std::string>() != "$"))
          throw Bad{where + ".consumerGroupStart must be \"0\" or \"$\""};
        c.service.consumerGroupStartFor[it.key()] = f->get<std::string>();
      }
    }
  }
  if (j.contains("auth")) {
    const auto& a = j["auth"];
    if (!a.is_object() || (a.contains("tokens") && !a["tokens"].is_array())) throw Bad{path + ": auth.tokens must be an array"};
    only_known(a, path, "auth.", {"tokens", "metricsPublic"});
    if (a.contains("metricsPublic")) {
      if (!a["metricsPublic"].is_boolean()) throw Bad{path + ": auth.metricsPublic must be true or false"};
      c.auth.metricsPublic = a["metricsPublic"].get<bool>();
    }
    for (std::size_t i = 0; a.contains("tokens") && i < a["tokens"].size(); ++i) {
      const auto& t = a["tokens"][i];
      const std::string where = "auth.tokens[" + std::to_string(i) + "]";
      if (!t.is_object()) throw Bad{path + ": " + where + " must be an object"};
      only_known(t, path, where + ".", {"token", "tokenFile", "role", "name", "streams", "groups"});
      http::Token tok;
      auto token = str(t, "token", where + ".token");
      if (auto file = str(t, "tokenFile", where + ".tokenFile")) {  // a mounted Secret
        if (token) throw Bad{path + ": " + where + ": token or tokenFile, not both"};
        std::string error;
        token = store::read_secret_file(*file, error);
        if (!error.empty()) throw Bad{path + ": " + where + ".tokenFile: " + error};
        tok.file = *file;
      }
      if (!token || token->size() < kMinTokenLength)
        throw Bad{path + ": " + where + ".token must be a string of " + std::to_string(kMinTokenLength) + " characters or more"};
      tok.token = *token;
      if (auto role = str(t, "role", where + ".role")) tok.role = *role;
      if (auto name = str(t, "name", where + ".name")) {
        if (name->empty() || name->size() > 64) throw Bad{path + ": " + where + ".name must be 1 to 64 characters"};
        tok.name = *name;
      }
      if (tok.role != "member" && tok.role != "admin") throw Bad{path + ": " + where + ".role must be member or admin"};
      for (const char* list : {"streams", "groups"}) {
        if (!t.contains(list)) continue;
        if (!t[list].is_array()) throw Bad{path + ": " + where + "." + list + " must be an array of patterns"};
        std::vector<std::string> pats;
        for (const auto& p : t[list]) {
          if (!p.is_string()) throw Bad{path + ": " + where + "." + list + " must hold strings"};
          pats.push_back(p.get<std::string>());
        }
        (std::string(list) == "streams" ? tok.streams : tok.groups) = pats;
      }
      c.auth.tokens.push_back(std::move(tok));
    }
  }
}

// The HTTPS settings' flags and variables: --tls-<name>, RSC_TLS_<NAME>.
struct HttpsField {
  const char* flag;
  const char* env;
  std::string http::ServerTls::*member;
};
const HttpsField kHttpsFields[] = {{"--tls-cert-file", "RSC_TLS_CERT_FILE", &http::ServerTls::certFile},
                                   {"--tls-key-file", "RSC_TLS_KEY_FILE", &http::ServerTls::keyFile},
                                   {"--tls-client-ca-file", "RSC_TLS_CLIENT_CA_FILE", &http::ServerTls::clientCaFile},
                                   {"--tls-peer-ca-file", "RSC_TLS_PEER_CA_FILE", &http::ServerTls::peerCaFile},
                                   {"--tls-peer-name", "RSC_TLS_PEER_NAME", &http::ServerTls::peerName},
                                   {"--tls-min-version", "RSC_TLS_MIN_VERSION", &http::ServerTls::minVersion},
                                   {"--tls-ciphers", "RSC_TLS_CIPHERS", &http::ServerTls::ciphers}};

void validate(const Config& c) {
  if (c.probeListen && c.probeListen->second == c.http.port)
    throw Bad{"probe-listen: port " + std::to_string(c.http.port) + " is the API's; give the probes a port of their own"};
  if (auto e = store::check_tls_files(c.redis.tls); !e.empty()) throw Bad{"redis TLS: " + e};
  if (auto e = http::check_server_tls(c.http.tls); !e.empty()) throw Bad{"https: " + e};
  const auto& s = c.service;
  if (s.core.leaseRenewalSlackMs > s.core.memberLeaseTtlMs)
    throw Bad{"lease-renewal-slack (" + std::to_string(s.core.leaseRenewalSlackMs) + "ms) must not exceed member-lease-ttl (" +
              std::to_string(s.core.memberLeaseTtlMs) + "ms)"};
  if (2 * s.core.leaseRenewalSlackMs > s.core.rebalanceTimeoutMs)
    throw Bad{"lease-renewal-slack (" + std::to_string(s.core.leaseRenewalSlackMs) +
              "ms) must be at most half the rebalance-timeout (" + std::to_string(s.core.rebalanceTimeoutMs) +
              "ms): a pod that has not seen a revocation may answer for that long"};
  if (s.core.memberLeaseTtlMs <= s.core.heartbeatIntervalMs)
    throw Bad{"member-lease-ttl (" + std::to_string(s.core.memberLeaseTtlMs) + "ms) must exceed heartbeat-interval (" +
              std::to_string(s.core.heartbeatIntervalMs) + "ms)"};
  if (s.storeStallMs >= s.core.memberLeaseTtlMs)
    throw Bad{"store-stall (" + std::to_string(s.storeStallMs) + "ms) must be below member-lease-ttl (" +
              std::to_string(s.core.memberLeaseTtlMs) + "ms)"};
  if (s.lagIntervalMs != 0 && s.lagIntervalMs < 1000)
    throw Bad{"lag-interval (" + std::to_string(s.lagIntervalMs) +
              "ms) must be 0 (no lag sampling) or at least 1000ms: each round reads every shard of every stream"};
  if (s.podLeaseMs < 3 * 50)
    throw Bad{"pod-lease (" + std::to_string(s.podLeaseMs) + "ms) must be at least 150ms"};
  if (s.podLeaseMs >= s.core.memberLeaseTtlMs)
    throw Bad{"pod-lease (" + std::to_string(s.podLeaseMs) + "ms) must be below member-lease-ttl (" +
              std::to_string(s.core.memberLeaseTtlMs) +
              "ms): a frozen pod keeps its groups' deadline work until its pod lease lapses"};
}

}  // namespace

std::string usage() {
  return "usage: rsc-coordinator [--check-config] [--config FILE] [--listen HOST:PORT] [--advertise HOST:PORT]\n"
         "         [--probe-listen HOST:PORT] [--no-pod-link]\n"
         "         [--redis HOST:PORT[,HOST:PORT...]]\n"
         "         [--redis-cluster] [--redis-node-zones HOST:PORT=ZONE,...] [--tick-interval-ms N] [--heartbeat-interval-ms N] [--member-lease-ttl-ms N]\n"
         "         [--rebalance-timeout-ms N] [--lease-renewal-slack-ms N] [--mutex-ttl-ms N] [--default-shard-count N]\n"
         "         [--store-connections N] [--http-threads N] [--scheduler-threads N] [--shutdown-grace-ms N]\n"
         "         [--http-header-timeout-ms N] [--http-idle-timeout-ms N] [--pod-lease-ms N]\n"
         "         [--store-deadline-ms N] [--store-stall-ms N] [--ready-store-grace-ms N] [--group-retire-after-ms N]\n"
         "         [--lag-interval-ms N]\n"
         "         [--scale-in-grace-ms N] [--retired-shard-ttl-ms N] [--static-session-timeout-ms N]\n"
         "         [--max-groups-per-stream N] [--max-connections N] [--consumer-group-start 0|$]\n"
         "         [--redis-user U] [--redis-password-file F] [--redis-tls] [--redis-tls-ca-file F | --redis-tls-ca-dir D]\n"
         "         [--redis-tls-cert-file F --redis-tls-key-file F] [--redis-tls-server-name NAME]\n"
         "         [--tls-cert-file F --tls-key-file F [--tls-client-ca-file F] [--tls-peer-ca-file F] [--tls-peer-name N]\n"
         "          [--tls-min-version 1.2|1.3] [--tls-ciphers LIST] [--tls-expiry-warning-days N]]\n"
         "HTTPS: --tls-cert-file/--tls-key-file serve HTTPS (files re-read when they change or on SIGHUP);\n"
         "--tls-client-ca-file requires client certificates of that CA (mutual TLS); pods forward to each other\n"
         "over TLS, verifying the other pod against --tls-peer-ca-file (default the client CA, else the system's)\n"
         "and the name --tls-peer-name (default its address); TLS 1.2 and 1.3 (--tls-min-version 1.3: 1.3 only), TLS 1.2\n"
         "with forward-secret AEAD suites only (--tls-ciphers: an OpenSSL list, default " + std::string(http::kDefaultTls12Ciphers) + ").\n"
         "Env RSC_TLS_CERT_FILE etc.; file \"tls\": {...}. --probe-listen HOST:PORT (RSC_PROBE_LISTEN, \"probeListen\"):\n"
         "/healthz and /readyz also over plain HTTP there, and nothing else (kubelet probes under mutual TLS).\n"
         "--no-pod-link (RSC_POD_LINK=false, \"podLink\": false): each forwarded call is an HTTP exchange of its own\n"
         "instead of a frame on one pod link per other pod (many calls in flight on one connection).\n"
         "Defaults: listen 0.0.0.0:8080, redis 127.0.0.1:6379, tick 1000ms, heartbeat 3000ms,\n"
         "advertise (where the other pods forward the calls of the groups this pod serves, and where rsc's\n"
         "clients send them directly: each answer about a group names its pod in Rsc-Group-Owner) the listen\n"
         "address, 127.0.0.1 when listening on all interfaces: set it to the pod's IP or a name that resolves\n"
         "to it (and that its certificate names, with TLS) when pods run apart,\n"
         "--redis with several nodes (seeds of a Redis Cluster) or --redis-cluster: Redis Cluster mode,\n"
         "--redis-node-zones (RSC_REDIS_NODE_ZONES, \"redis\": {\"nodeZones\"}): the zone of each Redis node as\n"
         "CLUSTER SLOTS names it, for PUT .../racks {\"from\": \"cluster-node-zone\"} (none by default),\n"
         "lease 15000ms, rebalance timeout 60000ms, mutex TTL 2000ms, 16 shards for a new stream,\n"
         "a static member's shards (instanceId) kept for it three leases after it left with -2 or died,\n"
         "lease renewal slack twice the heartbeat interval (at most half the lease and a quarter of the\n"
         "rebalance timeout; 0: every heartbeat is written),\n"
         "pod lease a third of the member lease (at most 5000ms; it must stay below the member lease),\n"
         "store deadline 1000ms (then RETRY), store stall 500ms (slower is an outage), /readyz ready through a\n"
         "store outage of up to one lease (--ready-store-grace-ms; 0: not ready at once),\n"
         "idle groups leave memory after 3 leases, lag read from Redis (XINFO GROUPS) every 10000ms\n"
         "(0: off), a shrink's shards retired no sooner than 10000ms after it, their streams then kept\n"
         "(--retired-shard-ttl-ms N: deleted N ms after they retire), no limit of groups per stream, connections at most\n"
         "3/4 of the file descriptor limit (raised to its hard limit at start), 2 HTTP threads, half the\n"
         "cores (at least one) as actor scheduler threads, a group's Redis consumer\n"
         "groups created at 0 (records produced before the group existed are read; $: only new ones).\n"
         "Environment: RSC_CONFIG, RSC_LISTEN, RSC_ADVERTISE, RSC_REDIS, RSC_REDIS_CLUSTER, RSC_REDIS_USER,\n"
         "RSC_REDIS_PASSWORD (or RSC_REDIS_PASSWORD_FILE: a file holding it), RSC_REDIS_TLS, RSC_REDIS_TLS_CA_FILE,\n"
         "RSC_REDIS_TLS_CA_DIR, RSC_REDIS_TLS_CERT_FILE, RSC_REDIS_TLS_KEY_FILE, RSC_REDIS_TLS_SERVER_NAME and\n"
         "RSC_<SETTING>[_MS] (e.g. RSC_TICK_INTERVAL_MS); flags override them, they override the file.\n"
         "The file is JSON: {\"listen\": ..., \"redis\": {\"address\", \"cluster\", \"user\", \"password\" | \"passwordFile\",\n"
         "\"tls\": {\"caFile\", \"caDir\", \"certFile\", \"keyFile\", \"serverName\"}},\n"
         "\"coordinator\": {\"tick-interval\": ms, ..., \"consumer-group-start\": \"0\"|\"$\"},\n"
         "\"groups\": {\"<stream>/<group>\": {\"consumerGroupStart\": \"0\"|\"$\"}}, \"auth\": {\"tokens\": [{\"token\" | \"tokenFile\", \"role\",\n"
         "\"streams\": [patterns], \"groups\": [patterns], \"name\"}], \"metricsPublic\": true}}. No tokens: the server\n"
         "runs open. metricsPublic false: GET /metrics needs a token too (its labels name every group).\n"
         "A token's optional name is the caller in the audit line every admin call logs.\n"
         "--check-config validates the file, environment and flags, prints the settings and exits\n"
         "(0 valid, 2 not) without connecting to anything.\n";
}

Parsed parse(const std::vector<std::string>& args, const std::function<const char*(const char*)>& env) {
  Parsed out;
  Config c;
  c.http.port = 8080;
  try {
    // The file first (flag or env), then env, then flags.
    std::optional<std::string> file;
    if (const char* f = env("RSC_CONFIG")) file = f;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--help" || args[i] == "-h") {
        out.help = true;
        return out;
      }
      if (args[i] == "--version") {
        out.version = true;
        return out;
      }
      if (args[i] == "--config") {
        if (i + 1 >= args.size()) throw Bad{"--config needs a value"};
        file = args[i + 1];
      }
    }
    if (file) load_file(c, *file);
    if (const char* v = env("RSC_LISTEN")) set_listen(c, v, "RSC_LISTEN");
    if (const char* v = env("RSC_ADVERTISE")) set_advertise(c, v, "RSC_ADVERTISE");
    if (const char* v = env("RSC_PROBE_LISTEN")) set_probe_listen(c, v, "RSC_PROBE_LISTEN");
    if (const char* v = env("RSC_REDIS")) set_redis(c, v, "RSC_REDIS");
    if (const char* v = env("RSC_REDIS_CLUSTER")) set_redis_cluster(c, v, "RSC_REDIS_CLUSTER");
    if (const char* v = env("RSC_REDIS_NODE_ZONES")) set_node_zones(c, v, "RSC_REDIS_NODE_ZONES");
    if (const char* v = env("RSC_POD_LINK")) c.http.podLink = parse_bool(v, "RSC_POD_LINK");
    if (auto e = store::apply_redis_env(c.redis, env); !e.empty()) throw Bad{e};
    for (const auto& f : kHttpsFields)
      if (const char* v = env(f.env)) c.http.tls.*f.member = v;
    if (const char* v = env("RSC_CONSUMER_GROUP_START")) set_group_start(c, v, "RSC_CONSUMER_GROUP_START");
    for (const auto& key : kNumeric) {
      const auto name = env_name(key);
      if (const char* v = env(name.c_str())) set_number(c, key, positive(v, name, allows_zero(key)), name);
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      const auto& a = args[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= args.size()) throw Bad{a + " needs a value"};
        return args[++i];
      };
      if (a == "--config") {
        value();
      } else if (a == "--check-config") {
        out.checkOnly = true;
      } else if (a == "--listen") {
        set_listen(c, value(), a);
      } else if (a == "--advertise") {
        set_advertise(c, value(), a);
      } else if (a == "--probe-listen") {
        set_probe_listen(c, value(), a);
      } else if (a == "--redis") {
        set_redis(c, value(), a);
      } else if (a == "--redis-cluster") {
        c.redis.cluster = true;
      } else if (a == "--redis-node-zones") {
        set_node_zones(c, value(), a);
      } else if (a == "--no-pod-link") {
        c.http.podLink = false;
      } else if (a == "--consumer-group-start") {
        set_group_start(c, value(), a);
      } else if (std::string error; store::apply_redis_flag(c.redis, a, value, error)) {
        if (!error.empty()) throw Bad{error};
      } else if (auto f = std::find_if(std::begin(kHttpsFields), std::end(kHttpsFields),
                                       [&](const HttpsField& h) { return a == h.flag; });
                 f != std::end(kHttpsFields)) {
        c.http.tls.*f->member = value();
        if ((c.http.tls.*f->member).empty()) throw Bad{a + " needs a non-empty value"};
      } else {
        bool known = false;
        for (const auto& key : kNumeric) {
          if (a == flag_name(key)) {
            set_number(c, key, positive(value(), a, allows_zero(key)), a);
            known = true;
            break;
          }
        }
        if (!known) throw Bad{"unknown argument '" + a + "' (see --help)"};
      }
    }
    // A heartbeat is left unwritten only when it comes less than the slack after the member's last
    // written one: twice the interval leaves one in two of a steady member's heartbeats unwritten.
    c.service.core.leaseRenewalSlackMs =
        c.leaseRenewalSlackMs ? *c.leaseRenewalSlackMs
                              : std::min({2 * c.service.core.heartbeatIntervalMs, c.service.core.memberLeaseTtlMs / 2,
                                          c.service.core.rebalanceTimeoutMs / 4});
    // A frozen or stalled pod keeps its groups' deadline work (expiries, rebalance timeouts, holds
    // ending) until its pod lease lapses: by default a third of the member lease, so a member that
    // fenced itself in a frozen pod's group is expired well within one more lease.
    c.service.podLeaseMs =
        c.podLeaseMs ? *c.podLeaseMs
                     : std::clamp<int64_t>(c.service.core.memberLeaseTtlMs / 3, 150, 5000);
    // A forwarded call may wait for one store round trip at the pod that serves its group.
    c.http.forwardTimeoutMs = c.service.storeDeadlineMs + 500;
    validate(c);
  } catch (const Bad& b) {
    out.error = b.what;
    return out;
  }
  out.config = std::move(c);
  return out;
}

std::string summary(const Config& c) {
  std::ostringstream os;
  os << "listen=" << c.http.host << ":" << c.http.port << " redis=" << c.redis.host << ":" << c.redis.port
     << (c.redis.cluster ? " (cluster, " + std::to_string(std::max<std::size_t>(1, c.redis.seeds.size())) + " seeds)" : "")
     << (c.redis.password.empty() ? "" : " (auth)")
     << (c.service.redisNodeZones.empty() ? std::string() : " node-zones=" + std::to_string(c.service.redisNodeZones.size()))
     << " redis-tls=" << store::describe_tls(c.redis.tls)
     << " https=" << (c.http.tls.enabled() ? "on, certificate " + c.http.tls.certFile +
                                                 (c.http.tls.clientCaFile.empty() ? std::string() : ", client CA " + c.http.tls.clientCaFile) +
                                                 (c.http.tls.minVersion == "1.3" ? ", TLS 1.3 only" : ", TLS 1.2+") +
                                                 (c.http.tls.ciphers.empty() ? std::string() : ", TLS 1.2 ciphers " + c.http.tls.ciphers)
                                           : std::string("off"))
     << (c.probeListen ? " probes=http://" + c.probeListen->first + ":" + std::to_string(c.probeListen->second) : std::string())
     << " pod-link=" << (c.http.podLink ? "on" : "off")
     << " tick=" << c.service.tickIntervalMs
     << "ms heartbeat=" << c.service.core.heartbeatIntervalMs << "ms lease=" << c.service.core.memberLeaseTtlMs
     << "ms rebalance-timeout=" << c.service.core.rebalanceTimeoutMs << "ms lease-renewal-slack=" << c.service.core.leaseRenewalSlackMs << "ms mutex-ttl=" << c.service.mutexTtlMs
     << "ms default-shards=" << c.service.defaultShardCount << " store-connections=" << c.service.storeConnections
     << " http-threads=" << c.http.threads << " scheduler-threads=" << actors::scheduler_threads(c.service.schedulerThreads)
     << " pod-lease=" << c.service.podLeaseMs << "ms store-deadline=" << c.service.storeDeadlineMs
     << "ms store-stall=" << c.service.storeStallMs << "ms ready-store-grace="
     << (c.service.readyStoreGraceMs < 0 ? c.service.core.memberLeaseTtlMs : c.service.readyStoreGraceMs)
     << "ms group-retire-after=" << c.service.retire_after_ms()
     << "ms lag-interval=" << c.service.lagIntervalMs << "ms scale-in-grace=" << c.service.scaleInGraceMs << "ms retired-shard-ttl=" << (c.service.retiredShardTtlMs < 0 ? std::string("keep") : std::to_string(c.service.retiredShardTtlMs) + "ms") << " static-session-timeout=" << c.service.core.static_session_timeout() << "ms max-groups-per-stream=" << c.service.maxGroupsPerStream << " consumer-group-start=" << c.service.consumerGroupStartId << " tokens=" << c.auth.tokens.size();
  // Each token's scope (never the token itself), and whether /metrics needs one.
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
    return out;
  };
  for (std::size_t i = 0; i < c.auth.tokens.size(); ++i) {
    const auto& t = c.auth.tokens[i];
    os << (i == 0 ? " [" : "; ") << (t.name.empty() ? "#" + std::to_string(i) : t.name) << ": " << t.role
       << " streams=" << join(t.streams) << " groups=" << join(t.groups) << (i + 1 == c.auth.tokens.size() ? "]" : "");
  }
  os << " metrics-public=" << (c.auth.open() ? "yes (no tokens)" : c.auth.metricsPublic ? "yes" : "no");
  return os.str();
}

TokenFiles::TokenFiles(http::AuthConfig initial)
    : current_(std::make_shared<const http::AuthConfig>(std::move(initial))), told_(current_->tokens.size()) {}

std::shared_ptr<const http::AuthConfig> TokenFiles::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

bool TokenFiles::watching() const {
  const auto a = current();
  return std::any_of(a->tokens.begin(), a->tokens.end(), [](const http::Token& t) { return !t.file.empty(); });
}

std::vector<std::string> TokenFiles::check() {
  const auto now = current();
  auto next = *now;
  std::vector<std::string> lines;
  bool changed = false;
  for (std::size_t i = 0; i < next.tokens.size(); ++i) {
    auto& t = next.tokens[i];
    if (t.file.empty()) continue;
    const std::string where = "auth.tokens[" + std::to_string(i) + "]" + (t.name.empty() ? "" : " (" + t.name + ")");
    std::string error;
    std::string read = store::read_secret_file(t.file, error);
    if (error.empty() && read.size() < kMinTokenLength)
      error = t.file + " holds fewer than " + std::to_string(kMinTokenLength) + " characters";
    if (!error.empty()) {
      // Said once per problem, not every second: a Secret being replaced may be briefly absent.
      if (told_[i] != error) lines.push_back(where + ": " + error + "; the token it held before is still accepted");
      told_[i] = error;
      continue;
    }
    if (!told_[i].empty()) lines.push_back(where + ": " + t.file + " can be read again");
    told_[i].clear();
    if (read == t.token) continue;
    t.token = std::move(read);  // never logged
    changed = true;
    lines.push_back(where + ": " + t.file + " changed; its new token is accepted and the old one no longer");
  }
  if (changed) {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = std::make_shared<const http::AuthConfig>(std::move(next));
    ++reloads_;
  }
  return lines;
}

int64_t TokenFiles::reloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reloads_;
}

}  // namespace rsc::server

#include "member/heartbeat_client.hpp"

#include <utility>

#include "protocol/codec.hpp"

namespace rsc::member {

namespace {
Url url_of(const std::string& s) {
  std::string err;
  return parse_url(s, &err);
}
}  // namespace

HeartbeatClient::HeartbeatClient(const std::string& coordinatorUrl, int64_t timeoutMs, TokenSource token,
                                 std::string streamPrefix, std::string group, std::string memberId, ClientTls tls)
    : configuredUrl_(coordinatorUrl),
      timeoutMs_(timeoutMs),
      tls_(tls),
      http_(url_of(coordinatorUrl), timeoutMs, std::move(tls)),
      token_(std::move(token)),
      prefix_(std::move(streamPrefix)),
      path_("/coord/v1/streams/" + prefix_ + "/groups/" + group + "/members/" + memberId + "/heartbeat") {}

HttpClient& HeartbeatClient::client_for(const std::string& url) {
  if (url.empty() || url == configuredUrl_) return http_;
  auto it = pods_.find(url);
  if (it != pods_.end()) return *it->second;
  if (pods_.size() >= 8) pods_.clear();  // owners come and go: keep the connections of the recent ones
  return *pods_.emplace(url, std::make_unique<HttpClient>(url_of(url), timeoutMs_, tls_)).first->second;
}

HeartbeatClient::Answer HeartbeatClient::heartbeat(const protocol::HeartbeatRequest& request, const std::string& url,
                                                   bool fresh) {
  Answer a;
  const std::string body = protocol::encode(request);
  auto& http = client_for(url);
  if (fresh) http.close();
  auto reply = token_.send([&](const std::string& token) { return http.request("POST", path_, body, token); });
  a.httpStatus = reply.status;
  a.owner = std::move(reply.groupOwner);
  if (reply.status == 0) {
    a.error = reply.error;
    return a;
  }
  auto d = protocol::decode_heartbeat_response(reply.body);
  if (d.ok())
    a.response = std::move(*d.value);
  else
    a.error = "HTTP " + std::to_string(reply.status) + ", answer does not decode: " + d.error.message;
  return a;
}

std::optional<std::string> HeartbeatClient::key_pattern(std::string* error) {
  const std::string path = "/coord/v1/streams/" + prefix_;
  auto reply = token_.send([&](const std::string& token) { return http_.request("GET", path, "", token); });
  if (reply.status != 200) {
    *error = "HTTP " + std::to_string(reply.status) + (reply.error.empty() ? "" : " (" + reply.error + ")");
    return std::nullopt;
  }
  auto m = protocol::decode_stream_metadata(reply.body);
  if (!m.ok()) {
    *error = "the coordinator's stream metadata does not decode: " + m.error.message;
    return std::nullopt;
  }
  return protocol::stream_key_pattern(prefix_, m.value->keyStyle);
}

}  // namespace rsc::member

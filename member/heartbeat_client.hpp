// The member's side of the heartbeat RPC and the stream metadata it needs, over HttpClient: bytes
// in, typed answers out. It decides nothing (the membership machine does).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "member/bearer_token.hpp"
#include "member/http_client.hpp"
#include "protocol/types.hpp"

namespace rsc::member {

class HeartbeatClient {
 public:
  // A token read from a file is read again when the coordinator refuses it, and the call made again
  // at once with the new one.
  HeartbeatClient(const std::string& coordinatorUrl, int64_t timeoutMs, TokenSource token, std::string streamPrefix,
                  std::string group, std::string memberId, ClientTls tls = {});

  struct Answer {
    std::optional<protocol::HeartbeatResponse> response;  // nullopt: no answer that decodes
    int httpStatus = 0;                                    // 0: no HTTP answer at all
    std::string error;                                     // why there is no response
    std::string owner;  // the pod that owns the group, as the answer named it (Rsc-Group-Owner)
  };
  // To `url` (a pod's base URL the last answer named; "" or the configured URL: the configured
  // one), on a kept-alive connection of its own per URL.
  // `fresh`: on a new connection (Membership::Reaction::reconnect).
  Answer heartbeat(const protocol::HeartbeatRequest& request, const std::string& url = {}, bool fresh = false);

  // The stream's shard key pattern ("orders:{shardIndex}"), or nullopt with `error` set.
  std::optional<std::string> key_pattern(std::string* error);

 private:
  HttpClient& client_for(const std::string& url);

  std::string configuredUrl_;
  int64_t timeoutMs_ = 0;
  ClientTls tls_;  // direct calls to a pod present the same client certificate as to the Service
  HttpClient http_;
  std::map<std::string, std::unique_ptr<HttpClient>> pods_;  // by base URL
  TokenSource token_;
  std::string prefix_, path_;
};

}  // namespace rsc::member

// The member's side of the heartbeat RPC and the stream metadata it needs, over HttpClient: bytes
// in, typed answers out. It decides nothing (the membership machine does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "member/http_client.hpp"
#include "protocol/types.hpp"

namespace rsc::member {

class HeartbeatClient {
 public:
  HeartbeatClient(const std::string& coordinatorUrl, int64_t timeoutMs, std::string token, std::string streamPrefix,
                  std::string group, std::string memberId, ClientTls tls = {});

  struct Answer {
    std::optional<protocol::HeartbeatResponse> response;  // nullopt: no answer that decodes
    int httpStatus = 0;                                    // 0: no HTTP answer at all
    std::string error;                                     // why there is no response
  };
  Answer heartbeat(const protocol::HeartbeatRequest& request);

  // The stream's shard key pattern ("orders:{shardIndex}"), or nullopt with `error` set.
  std::optional<std::string> key_pattern(std::string* error);

 private:
  HttpClient http_;
  std::string token_, prefix_, path_;
};

}  // namespace rsc::member

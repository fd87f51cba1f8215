// A small blocking HTTP/1.1 client with keep-alive, for the member runtime's heartbeats and the
// tools. No Boost in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace rsc::member {

struct Url {
  std::string host;
  int port = 80;
  std::string basePath;  // without a trailing slash
};
// "http://host:port[/base]"; returns std::nullopt-like empty host on error.
Url parse_url(const std::string& url, std::string* error);

struct HttpReply {
  int status = 0;  // 0: no answer (connection failed or timed out)
  std::string body;
  std::string error;
};

class HttpClient {
 public:
  HttpClient(Url url, int64_t timeoutMs);
  ~HttpClient();
  HttpReply request(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& bearerToken = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::member

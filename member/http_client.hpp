// A small blocking HTTP/1.1 client with keep-alive, for the member runtime's heartbeats and the
// tools. No Boost in this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace rsc::member {

struct Url {
  std::string host;
  int port = 80;
  std::string basePath;  // without a trailing slash
  bool https = false;
};
// "http://host:port[/base]" or "https://..." (port 443 by default); an empty host on error.
Url parse_url(const std::string& url, std::string* error);

// For https:// URLs: the CAs to verify the server with (default: the system's) and an optional
// client certificate (mutual TLS). The server's name (or IP address) in the URL is verified.
struct ClientTls {
  std::string caFile;
  std::string certFile, keyFile;
};
// The tools' flags for it: --coordinator-ca-file F, --coordinator-cert-file F,
// --coordinator-key-file F. true when `flag` is one of them (its value taken with `value()`).
bool apply_client_tls_flag(ClientTls& t, const std::string& flag, const std::function<std::string()>& value);
// Its files checked at start (store::unreadable_file, named by their flags): "" when fine.
std::string check_client_tls_files(const ClientTls& t);
inline constexpr const char* kClientTlsFlagsUsage =
    "[--coordinator-ca-file F] [--coordinator-cert-file F --coordinator-key-file F] (https://)";

struct HttpReply {
  int status = 0;  // 0: no answer (connection failed or timed out)
  std::string body;
  std::string error;
  // Retry-After in seconds when the answer carried one (a 503 while the store is away, a 409 while
  // a migration still drains), else -1.
  int64_t retryAfterSeconds = -1;
  // The pod that owns the group the call was about (header Rsc-Group-Owner), "" when not named.
  std::string groupOwner;
};

class HttpClient {
 public:
  HttpClient(Url url, int64_t timeoutMs, ClientTls tls = {});
  ~HttpClient();
  HttpReply request(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& bearerToken = {});
  // Closes the kept-alive connection: the next request opens a new one.
  void close();
  const Url& url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::member

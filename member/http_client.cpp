#include "member/http_client.hpp"

#include "redis/options.hpp"

#include <arpa/inet.h>
#include <unistd.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <optional>

namespace rsc::member {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;

Url parse_url(const std::string& url, std::string* error) {
  Url u;
  std::string scheme = "http://";
  if (url.compare(0, 8, "https://") == 0) {
    scheme = "https://";
    u.https = true;
    u.port = 443;
  } else if (url.compare(0, scheme.size(), scheme) != 0) {
    if (error) *error = "URL must start with http:// or https:// (got '" + url + "')";
    return u;
  }
  std::string rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  u.basePath = slash == std::string::npos ? "" : rest.substr(slash);
  while (!u.basePath.empty() && u.basePath.back() == '/') u.basePath.pop_back();
  const auto colon = hostport.rfind(':');
  if (colon == std::string::npos) {
    u.host = hostport;
  } else {
    u.host = hostport.substr(0, colon);
    try {
      u.port = std::stoi(hostport.substr(colon + 1));
    } catch (const std::exception&) {
      if (error) *error = "bad port in '" + url + "'";
      u.host.clear();
    }
  }
  if (u.host.empty() && error && error->empty()) *error = "no host in '" + url + "'";
  return u;
}

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

struct HttpClient::Impl {
  Url url;
  int64_t timeoutMs;
  net::io_context ioc;
  // The connection: TLS for https:// (its context made once, with the client), plain TCP for
  // http:// (which makes no TLS object at all).
  std::optional<net::ssl::context> ctx;
  std::string tlsError;  // the client certificate or CA could not be loaded: every request says so
  std::optional<TlsStream> tlsStream;
  std::optional<beast::tcp_stream> plainStream;
  beast::flat_buffer buffer;
  bool connected() const { return tlsStream.has_value() || plainStream.has_value(); }
  beast::tcp_stream& tcp() { return tlsStream ? tlsStream->next_layer() : *plainStream; }
  void disconnect() {
    tlsStream.reset();
    plainStream.reset();
  }

  void setup_tls(const ClientTls& t) {
    ctx.emplace(net::ssl::context::tls_client);
    ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                    net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
    ctx->set_verify_mode(net::ssl::verify_peer);
    beast::error_code ec;
    if (!t.caFile.empty()) {
      ctx->load_verify_file(t.caFile, ec);
      if (ec) tlsError = "CA file " + t.caFile + ": " + (::access(t.caFile.c_str(), R_OK) != 0 ? std::strerror(errno) : ec.message());
    } else {
      ctx->set_default_verify_paths(ec);
    }
    if (tlsError.empty() && (!t.certFile.empty() || !t.keyFile.empty())) {
      ctx->use_certificate_chain_file(t.certFile, ec);
      if (ec) tlsError = "client certificate " + t.certFile + ": " + ec.message();
      else ctx->use_private_key_file(t.keyFile, net::ssl::context::pem, ec);
      if (ec && tlsError.empty()) tlsError = "client key " + t.keyFile + ": " + ec.message();
    }
  }

  // beast::tcp_stream's deadline (expires_after) applies to asynchronous operations only: each
  // step is started asynchronously and the io_context run until it completes, so a server that
  // accepts but never answers (stopped, overloaded) costs at most the timeout.
  template <typename Start>
  void await(Start start) {
    beast::error_code ec;
    bool done = false;
    start([&](beast::error_code e, auto&&...) {
      ec = e;
      done = true;
    });
    ioc.restart();
    ioc.run();
    if (!done) ec = net::error::operation_aborted;
    if (ec) throw beast::system_error(ec);
  }

  void connect() {
    if (!tlsError.empty()) throw std::runtime_error(tlsError);
    if (url.https) tlsStream.emplace(ioc, *ctx);
    else plainStream.emplace(ioc);
    net::ip::tcp::resolver resolver(ioc);
    const auto endpoints = resolver.resolve(url.host, std::to_string(url.port));
    tcp().expires_after(std::chrono::milliseconds(timeoutMs));
    await([&](auto handler) { tcp().async_connect(endpoints, handler); });
    if (!url.https) return;
    // The server's certificate must name the host of the URL (or its IP address).
    SSL* ssl = tlsStream->native_handle();
    in6_addr a6{};
    in_addr a4{};
    if (::inet_pton(AF_INET, url.host.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, url.host.c_str(), &a6) == 1) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, url.host.c_str());
      SSL_set1_host(ssl, url.host.c_str());
    }
    try {
      await([&](auto handler) { tlsStream->async_handshake(net::ssl::stream_base::client, handler); });
    } catch (const beast::system_error& e) {
      std::string why = e.code().message();
      const long v = SSL_get_verify_result(ssl);
      if (v != X509_V_OK) why = std::string("certificate verify failed: ") + X509_verify_cert_error_string(v);
      throw std::runtime_error("TLS handshake with " + url.host + ":" + std::to_string(url.port) + " failed: " + why);
    }
  }

  // The write and the read, on the TLS stream or the TCP one.
  template <typename F>
  void with_stream(F f) {
    if (tlsStream) f(*tlsStream);
    else f(*plainStream);
  }
};

bool apply_client_tls_flag(ClientTls& t, const std::string& flag, const std::function<std::string()>& value) {
  std::string ClientTls::*field = flag == "--coordinator-ca-file"     ? &ClientTls::caFile
                                  : flag == "--coordinator-cert-file" ? &ClientTls::certFile
                                  : flag == "--coordinator-key-file"  ? &ClientTls::keyFile
                                                                      : nullptr;
  if (field == nullptr) return false;
  t.*field = value();
  return true;
}

std::string check_client_tls_files(const ClientTls& t) {
  for (const auto& [flag, path] : {std::pair<const char*, const std::string*>{"--coordinator-ca-file", &t.caFile},
                                   {"--coordinator-cert-file", &t.certFile},
                                   {"--coordinator-key-file", &t.keyFile}})
    if (auto e = store::unreadable_file(flag, *path); !e.empty()) return e;
  return {};
}

HttpClient::HttpClient(Url url, int64_t timeoutMs, ClientTls tls) : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->timeoutMs = timeoutMs;
  if (impl_->url.https) impl_->setup_tls(tls);
}
HttpClient::~HttpClient() = default;
const Url& HttpClient::url() const { return impl_->url; }

void HttpClient::close() { impl_->disconnect(); }

HttpReply HttpClient::request(const std::string& method, const std::string& path, const std::string& body,
                              const std::string& bearerToken) {
  HttpReply out;
  // One retry on a fresh connection: a kept-alive connection the server closed meanwhile fails
  // at once, which says nothing about the server.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->connected();
    try {
      if (!reused) impl_->connect();
      bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), impl_->url.basePath + path, 11};
      req.set(bhttp::field::host, impl_->url.host);
      req.set(bhttp::field::content_type, "application/json");
      req.keep_alive(true);
      if (!bearerToken.empty()) req.set(bhttp::field::authorization, "Bearer " + bearerToken);
      req.body() = body;
      req.prepare_payload();
      impl_->tcp().expires_after(std::chrono::milliseconds(impl_->timeoutMs));  // write and read together
      bhttp::response<bhttp::string_body> res;
      impl_->buffer.clear();
      impl_->with_stream([&](auto& s) {
        impl_->await([&](auto handler) { bhttp::async_write(s, req, handler); });
        impl_->await([&](auto handler) { bhttp::async_read(s, impl_->buffer, res, handler); });
      });
      out.status = res.result_int();
      if (const auto ra = res.find(bhttp::field::retry_after); ra != res.end()) {
        const std::string v(ra->value());
        char* end = nullptr;
        const long long n = std::strtoll(v.c_str(), &end, 10);
        if (!v.empty() && *end == '\0' && n >= 0) out.retryAfterSeconds = n;
      }
      if (const auto o = res.find("Rsc-Group-Owner"); o != res.end()) out.groupOwner = std::string(o->value());
      out.body = std::move(res.body());
      if (!res.keep_alive()) impl_->disconnect();
      return out;
    } catch (const std::exception& e) {
      impl_->disconnect();
      out.status = 0;
      out.error = e.what();
      if (!reused) break;
    }
  }
  return out;
}

}  // namespace rsc::member

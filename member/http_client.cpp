#include "member/http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

namespace rsc::member {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;

Url parse_url(const std::string& url, std::string* error) {
  Url u;
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    if (error) *error = "URL must start with http:// (got '" + url + "')";
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

struct HttpClient::Impl {
  Url url;
  int64_t timeoutMs;
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

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
    stream.emplace(ioc);
    net::ip::tcp::resolver resolver(ioc);
    const auto endpoints = resolver.resolve(url.host, std::to_string(url.port));
    stream->expires_after(std::chrono::milliseconds(timeoutMs));
    await([&](auto handler) { stream->async_connect(endpoints, handler); });
  }
};

HttpClient::HttpClient(Url url, int64_t timeoutMs) : impl_(std::make_unique<Impl>()) {
  impl_->url = std::move(url);
  impl_->timeoutMs = timeoutMs;
}
HttpClient::~HttpClient() = default;

HttpReply HttpClient::request(const std::string& method, const std::string& path, const std::string& body,
                              const std::string& bearerToken) {
  HttpReply out;
  // One retry on a fresh connection: a kept-alive connection the server closed meanwhile fails
  // at once, which says nothing about the server.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl_->stream.has_value();
    try {
      if (!reused) impl_->connect();
      bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), impl_->url.basePath + path, 11};
      req.set(bhttp::field::host, impl_->url.host);
      req.set(bhttp::field::content_type, "application/json");
      req.keep_alive(true);
      if (!bearerToken.empty()) req.set(bhttp::field::authorization, "Bearer " + bearerToken);
      req.body() = body;
      req.prepare_payload();
      impl_->stream->expires_after(std::chrono::milliseconds(impl_->timeoutMs));  // write and read together
      impl_->await([&](auto handler) { bhttp::async_write(*impl_->stream, req, handler); });
      bhttp::response<bhttp::string_body> res;
      impl_->buffer.clear();
      impl_->await([&](auto handler) { bhttp::async_read(*impl_->stream, impl_->buffer, res, handler); });
      out.status = res.result_int();
      out.body = std::move(res.body());
      if (!res.keep_alive()) impl_->stream.reset();
      return out;
    } catch (const std::exception& e) {
      impl_->stream.reset();
      out.status = 0;
      out.error = e.what();
      if (!reused) break;
    }
  }
  return out;
}

}  // namespace rsc::member

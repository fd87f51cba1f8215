// check_server_tls (http/server.hpp) with OpenSSL alone: --check-config validates the HTTPS files
// without the server (Beast, Asio) linked in.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>

#include "http/server.hpp"
#include "tls/files.hpp"

namespace rsc::http {

std::string check_server_tls(const ServerTls& t) {
  if (!t.enabled()) return t.keyFile.empty() && t.clientCaFile.empty() ? "" : "a key or client CA file needs a certificate file too";
  if (t.keyFile.empty()) return "a certificate needs its key file too";
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"certificate", t.certFile},
                                   {"key", t.keyFile},
                                   {"client CA", t.clientCaFile},
                                   {"peer CA", t.peerCaFile}})
    if (!path.empty())
      if (auto p = tls::file_problem(path); !p.empty()) return what + " " + p;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return "cannot make a TLS context: " + tls::openssl_reasons();
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), t.certFile.c_str()) != 1)
    return "certificate " + t.certFile + ": " + tls::openssl_reasons();
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), t.keyFile.c_str(), SSL_FILETYPE_PEM) != 1) {
    const auto r = tls::openssl_reasons();
    return r.find("mismatch") != std::string::npos ? "key " + t.keyFile + " does not match the certificate " + t.certFile
                                                   : "key " + t.keyFile + ": " + r;
  }
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"client CA", t.clientCaFile}, {"peer CA", t.peerCaFile}})
    if (!path.empty() && SSL_CTX_load_verify_locations(ctx.get(), path.c_str(), nullptr) != 1)
      return what + " " + path + ": " + tls::openssl_reasons();
  return {};
}

}  // namespace rsc::http

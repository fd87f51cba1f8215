// check_server_tls (http/server.hpp) with OpenSSL alone: --check-config validates the HTTPS files
// without the server (Beast, Asio) linked in.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "http/server.hpp"

namespace rsc::http {
namespace {

std::string reasons() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    const char* r = ERR_reason_error_string(code);
    if (!out.empty()) out += "; ";
    out += r ? r : "error " + std::to_string(code);
  }
  return out;
}

std::string file_problem(const std::string& what, const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return what + " " + path + ": " + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return what + " " + path + ": not a regular file";
  return {};
}

}  // namespace

std::string check_server_tls(const ServerTls& t) {
  if (!t.enabled()) return t.keyFile.empty() && t.clientCaFile.empty() ? "" : "a key or client CA file needs a certificate file too";
  if (t.keyFile.empty()) return "a certificate needs its key file too";
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"certificate", t.certFile},
                                   {"key", t.keyFile},
                                   {"client CA", t.clientCaFile},
                                   {"peer CA", t.peerCaFile}})
    if (!path.empty())
      if (auto p = file_problem(what, path); !p.empty()) return p;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return "cannot make a TLS context: " + reasons();
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), t.certFile.c_str()) != 1)
    return "certificate " + t.certFile + ": " + reasons();
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), t.keyFile.c_str(), SSL_FILETYPE_PEM) != 1) {
    const auto r = reasons();
    return r.find("mismatch") != std::string::npos ? "key " + t.keyFile + " does not match the certificate " + t.certFile
                                                   : "key " + t.keyFile + ": " + r;
  }
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"client CA", t.clientCaFile}, {"peer CA", t.peerCaFile}})
    if (!path.empty() && SSL_CTX_load_verify_locations(ctx.get(), path.c_str(), nullptr) != 1)
      return what + " " + path + ": " + reasons();
  return {};
}

}  // namespace rsc::http

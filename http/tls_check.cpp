// check_server_tls (http/server.hpp) with OpenSSL alone: --check-config validates the HTTPS files
// without the server (Beast, Asio) linked in.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>

#include "http/server.hpp"
#include "tls/files.hpp"

namespace rsc::http {

std::string apply_tls_policy(void* sslCtx, const ServerTls& t) {
  auto* ctx = static_cast<SSL_CTX*>(sslCtx);
  int version = TLS1_2_VERSION;
  if (t.minVersion == "1.3")
    version = TLS1_3_VERSION;
  else if (!t.minVersion.empty() && t.minVersion != "1.2")
    return "minimum TLS version '" + t.minVersion + "': 1.2 or 1.3";
  if (SSL_CTX_set_min_proto_version(ctx, version) != 1) return "minimum TLS version: " + tls::openssl_reasons();
  const std::string list = t.ciphers.empty() ? kDefaultTls12Ciphers : t.ciphers;
  ERR_clear_error();
  if (SSL_CTX_set_cipher_list(ctx, list.c_str()) != 1)
    return "TLS 1.2 ciphers '" + list + "': none of them is known to OpenSSL (" + tls::openssl_reasons() + ")";
  return {};
}

int64_t certificate_not_after(void* sslCtx) {
  X509* cert = SSL_CTX_get0_certificate(static_cast<SSL_CTX*>(sslCtx));
  if (cert == nullptr) return 0;
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::string handshake_failure_reason(const std::string& m) {
  auto has = [&](const char* part) { return m.find(part) != std::string::npos; };
  if (has("header timeout") || has("timed out")) return "timeout";
  if (has("http request") || has("plain-HTTP")) return "plain_http";
  if (has("peer did not return a certificate") || has("certificate required")) return "no_client_certificate";
  if (has("certificate verify failed")) return "client_certificate_rejected";
  if (has("alert unknown ca") || has("alert bad certificate") || has("alert certificate") || has("alert decrypt error"))
    return "server_certificate_rejected";
  if (has("unsupported protocol") || has("wrong version number") || has("version too low") || has("protocol version"))
    return "protocol_version";
  if (has("no shared cipher") || has("no suitable") || has("no cipher")) return "no_shared_cipher";
  return "other";
}

std::string certificate_expiry_warning(const std::string& file, int64_t notAfter, int64_t now, int64_t warnDays) {
  const int64_t left = notAfter - now;
  if (notAfter == 0 || left > warnDays * 86400) return {};
  if (left <= 0)
    return "the certificate " + file + " has EXPIRED (" + std::to_string(-left / 86400) +
           " day(s) ago): clients that verify it refuse this pod; replace it (the file is read again when it changes)";
  return "the certificate " + file + " expires in " + std::to_string(left / 86400) + " day(s) " +
         std::to_string(left % 86400 / 3600) + " hour(s): renew it (the file is read again when it changes)";
}

std::string check_server_tls(const ServerTls& t) {
  if (!t.enabled())
    return t.keyFile.empty() && t.clientCaFile.empty() && t.minVersion.empty() && t.ciphers.empty()
               ? ""
               : "a key, client CA, minimum version or cipher setting needs a certificate file too";
  if (t.keyFile.empty()) return "a certificate needs its key file too";
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"certificate", t.certFile},
                                   {"key", t.keyFile},
                                   {"client CA", t.clientCaFile},
                                   {"peer CA", t.peerCaFile}})
    if (!path.empty())
      if (auto p = tls::file_problem(path); !p.empty()) return what + " " + p;
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return "cannot make a TLS context: " + tls::openssl_reasons();
  if (auto e = apply_tls_policy(ctx.get(), t); !e.empty()) return e;
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

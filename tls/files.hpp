// Small helpers every TLS setting of rsc shares (Redis client, HTTPS server, --check-config):
// OpenSSL's queued errors as one readable line, and why a configured file cannot be used.
#pragma once

#include <string>

namespace rsc::tls {

// OpenSSL's queued errors, taken off the queue, as one line of its reason strings
// ("wrong version number; ..."); empty when none were queued.
std::string openssl_reasons();

// Why `path` cannot be used as a certificate, key or CA file (or, with `dir`, a CA directory):
// "PATH: No such file or directory", "PATH: not a regular file", "PATH: Permission denied";
// empty when it can. A device or FIFO is refused before anything opens it (it could block).
std::string file_problem(const std::string& path, bool dir = false);

}  // namespace rsc::tls

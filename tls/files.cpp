#include "tls/files.hpp"

#include <openssl/err.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rsc::tls {

std::string openssl_reasons() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(code);
    if (!out.empty()) out += "; ";
    out += reason ? reason : "error " + std::to_string(code);
  }
  return out;
}

std::string file_problem(const std::string& path, bool dir) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) return path + (dir ? ": not a directory" : ": not a regular file");
  if (::access(path.c_str(), R_OK) != 0) return path + ": " + std::strerror(errno);
  return {};
}

}  // namespace rsc::tls

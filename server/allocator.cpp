#include "server/allocator.hpp"

#ifdef RSC_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace rsc::server {

std::string allocator_name() {
#ifdef RSC_WITH_JEMALLOC
  // Asked of the allocator itself, so the line names the version that is loaded.
  const char* version = nullptr;
  size_t len = sizeof(version);
  if (mallctl("version", &version, &len, nullptr, 0) == 0 && version) return std::string("jemalloc ") + version;
  return "jemalloc";
#else
  return "glibc malloc";
#endif
}

}  // namespace rsc::server

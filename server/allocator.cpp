#include "server/allocator.hpp"

#ifdef RSC_WITH_TCMALLOC
#include <gperftools/tcmalloc.h>
#endif

namespace rsc::server {

std::string allocator_name() {
#ifdef RSC_WITH_TCMALLOC
  // Asked of the allocator itself, so the line names the version that is loaded ("gperftools 2.10").
  int major = 0, minor = 0;
  const char* patch = nullptr;
  const char* version = tc_version(&major, &minor, &patch);
  return std::string(version ? version : "tcmalloc");
#else
  return "glibc malloc";
#endif
}

}  // namespace rsc::server

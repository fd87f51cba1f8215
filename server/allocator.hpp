// Which heap rsc-coordinator was linked with, for its starting line (CMakeLists.txt, RSC_TCMALLOC).
#pragma once

#include <string>

namespace rsc::server {

// "gperftools <version>" (tcmalloc) when linked with it (and it is the malloc in use), else "glibc malloc".
std::string allocator_name();

}  // namespace rsc::server

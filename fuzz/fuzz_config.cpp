// libFuzzer: the config file (--config), as an operator might get it wrong. A clear error naming
// the field, or a config; never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "server/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/rsc-fuzz-config-" + std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto p = rsc::server::parse({"--config", path}, [](const char*) -> const char* { return nullptr; });
  if (!p.config && !p.help && p.error.empty()) __builtin_trap();
  return 0;
}

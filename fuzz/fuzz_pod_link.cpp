// libFuzzer: bytes read as pod-link frames (http/pod_link.hpp), as a pod reads what another sends.
// Whatever reads as a frame is written back byte for byte the same (the encoding is canonical), a
// frame never claims more bytes than were given, and nothing reads past them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "http/pod_link.hpp"

using namespace rsc::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto* p = reinterpret_cast<const char*>(data);
  for (int asAnswer = 0; asAnswer < 2; ++asAnswer) {
    std::size_t at = 0;
    while (at < size) {
      std::size_t used = 0;
      uint32_t id = 0;
      HttpRequest call;
      HttpResponse answer;
      const auto got = asAnswer ? link::read_answer(p + at, size - at, 1 << 16, used, id, answer)
                                : link::read_call(p + at, size - at, 1 << 16, used, id, call);
      if (got != link::Read::Frame) break;
      if (used == 0 || used > size - at) std::abort();
      std::string again;
      if (asAnswer) link::append_answer(again, id, answer);
      else link::append_call(again, id, call);
      if (again != std::string(p + at, used)) std::abort();
      at += used;
    }
  }
  return 0;
}

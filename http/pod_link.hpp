// The pod link: how one pod carries the calls it forwards to another. Instead of one HTTP exchange
// per call on a connection of its own, a pod opens one connection per other pod (per I/O thread),
// turns it into a link with an HTTP Upgrade, and sends every forwarded call on it as a frame with a
// call number; the other pod answers each frame when its group actor has the answer, in any order,
// and several calls and answers travel in one write and one read. No Asio here: the frames are
// plain bytes, tested and fuzzed on their own.
//
// A frame: a 4-byte length (big-endian, as every number here) of what follows, a 4-byte call
// number, then fields, each a 4-byte length and its bytes:
//   call:   method, target, content type, authorization, forwarded-by, body
//   answer: the status (4 bytes, 100-599), then content type, body, and header name and value
//           pairs to the frame's end
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "http/api.hpp"

namespace rsc::http::link {

// The request that turns a connection into a link: GET kTarget with "Upgrade: kProtocol"; a pod
// that speaks it answers 101, any other answer means "not here" (an older pod: plain HTTP then).
inline constexpr const char* kTarget = "/coord/internal/v1/pod-link";
inline constexpr const char* kProtocol = "rsc-pod-link/1";

void append_call(std::string& out, uint32_t id, const HttpRequest& r);
void append_answer(std::string& out, uint32_t id, const HttpResponse& r);

enum class Read { Frame, More, Malformed };

// Reads the first frame of data[0, size): Frame (and `used`, the bytes it took), More (it has not
// all arrived), or Malformed (a length over maxFrame, fields that overrun the frame, a bad status):
// the link cannot go on.
Read read_call(const char* data, std::size_t size, std::size_t maxFrame, std::size_t& used, uint32_t& id,
               HttpRequest& out);
Read read_answer(const char* data, std::size_t size, std::size_t maxFrame, std::size_t& used, uint32_t& id,
                 HttpResponse& out);

}  // namespace rsc::http::link

#include "http/pod_link.hpp"

#include <cstring>

namespace rsc::http::link {

namespace {

void put32(std::string& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.append(b, 4);
}

uint32_t get32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

void field(std::string& out, const std::string& v) {
  put32(out, static_cast<uint32_t>(v.size()));
  out.append(v);
}

// Starts a frame: its length is written by finish() once the fields are in.
std::size_t begin(std::string& out, uint32_t id) {
  const auto at = out.size();
  put32(out, 0);
  put32(out, id);
  return at;
}

void finish(std::string& out, std::size_t at) {
  const auto len = static_cast<uint32_t>(out.size() - at - 4);
  for (int i = 0; i < 4; ++i) out[at + static_cast<std::size_t>(i)] = static_cast<char>(len >> (24 - 8 * i));
}

// The fields of one frame, read in order; any overrun makes it bad.
struct Cursor {
  const char* p;
  const char* end;
  bool bad = false;
  bool done() const { return p == end; }
  uint32_t number() {
    if (end - p < 4) {
      bad = true;
      return 0;
    }
    const auto v = get32(p);
    p += 4;
    return v;
  }
  void take(std::string& into) {
    const auto n = number();
    if (bad || static_cast<std::size_t>(end - p) < n) {
      bad = true;
      return;
    }
    into.assign(p, n);
    p += n;
  }
};

bool has_line_break(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

// The frame at the front of data: More, Malformed, or Frame with its body in [c.p, c.end).
Read frame(const char* data, std::size_t size, std::size_t maxFrame, std::size_t& used, uint32_t& id, Cursor& c) {
  if (size < 4) return Read::More;
  const std::size_t len = get32(data);
  if (len < 4 || len > maxFrame) return Read::Malformed;
  if (size - 4 < len) return Read::More;
  used = 4 + len;
  id = get32(data + 4);
  c = Cursor{data + 8, data + 4 + len};
  return Read::Frame;
}

}  // namespace

void append_call(std::string& out, uint32_t id, const HttpRequest& r) {
  const auto at = begin(out, id);
  field(out, r.method);
  field(out, r.target);
  field(out, r.contentType);
  field(out, r.authorization);
  field(out, r.forwardedBy);
  field(out, r.body);
  finish(out, at);
}

void append_answer(std::string& out, uint32_t id, const HttpResponse& r) {
  const auto at = begin(out, id);
  put32(out, static_cast<uint32_t>(r.status));
  field(out, r.contentType);
  field(out, r.body);
  for (const auto& [k, v] : r.headers) {
    field(out, k);
    field(out, v);
  }
  finish(out, at);
}

Read read_call(const char* data, std::size_t size, std::size_t maxFrame, std::size_t& used, uint32_t& id,
               HttpRequest& out) {
  Cursor c{nullptr, nullptr};
  const auto got = frame(data, size, maxFrame, used, id, c);
  if (got != Read::Frame) return got;
  for (auto* f : {&out.method, &out.target, &out.contentType, &out.authorization, &out.forwardedBy, &out.body}) c.take(*f);
  if (c.bad || !c.done() || out.method.empty() || out.target.empty() || out.target.front() != '/') return Read::Malformed;
  // What a request line and headers could not hold (the handler and the audit log take them as such).
  for (const auto* f : {&out.method, &out.target, &out.contentType, &out.authorization, &out.forwardedBy})
    if (has_line_break(*f)) return Read::Malformed;
  return Read::Frame;
}

Read read_answer(const char* data, std::size_t size, std::size_t maxFrame, std::size_t& used, uint32_t& id,
                 HttpResponse& out) {
  Cursor c{nullptr, nullptr};
  const auto got = frame(data, size, maxFrame, used, id, c);
  if (got != Read::Frame) return got;
  const auto status = c.number();
  if (c.bad || status < 100 || status > 599) return Read::Malformed;
  out.status = static_cast<int>(status);
  c.take(out.contentType);
  c.take(out.body);
  if (has_line_break(out.contentType)) c.bad = true;
  out.headers.clear();
  while (!c.bad && !c.done()) {
    std::pair<std::string, std::string> h;
    c.take(h.first);
    c.take(h.second);
    // Written into an HTTP answer as they are: a line break would forge a header.
    if (h.first.empty() || has_line_break(h.first) || has_line_break(h.second)) c.bad = true;
    out.headers.push_back(std::move(h));
  }
  return c.bad ? Read::Malformed : Read::Frame;
}

}  // namespace rsc::http::link

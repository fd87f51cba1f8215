#include "redis/connection.hpp"

#include <poll.h>

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace rsc::store {
namespace {

// hiredis' parser builds each reply as a Value directly (its reply-object hooks) instead of a tree of
// redisReply to copy and free: one allocation per array and per string too long to keep inline.
// A child is the parent's element at its index (the parent's elements are sized when the array is
// made, so the address holds); only a whole reply (no parent) is allocated, and it is what hiredis
// frees on an error. A hook that cannot allocate returns null: hiredis then fails the read as out of
// memory.
Value* slot(const redisReadTask* t) {
  if (t->parent == nullptr) return new Value;
  return &static_cast<Value*>(t->parent->obj)->elements[static_cast<std::size_t>(t->idx)];
}
void* make_string(const redisReadTask* t, char* s, size_t n) noexcept {
  try {
    Value* v = slot(t);
    v->type = t->type == REDIS_REPLY_ERROR ? Value::Type::Error
              : t->type == REDIS_REPLY_STATUS ? Value::Type::Status
                                              : Value::Type::String;
    v->str.assign(s, n);
    return v;
  } catch (...) {
    return nullptr;
  }
}
void* make_array(const redisReadTask* t, int n) noexcept {
  try {
    Value* v = slot(t);
    v->type = Value::Type::Array;
    v->elements.resize(static_cast<std::size_t>(std::max(n, 0)));
    return v;
  } catch (...) {
    return nullptr;
  }
}
void* make_integer(const redisReadTask* t, long long n) noexcept {
  try {
    Value* v = slot(t);
    v->type = Value::Type::Integer;
    v->integer = n;
    return v;
  } catch (...) {
    return nullptr;
  }
}
void* make_nil(const redisReadTask* t) noexcept {
  try {
    return slot(t);  // a Value is Nil until told otherwise
  } catch (...) {
    return nullptr;
  }
}
void free_value(void* v) noexcept { delete static_cast<Value*>(v); }
redisReplyObjectFunctions kValueHooks{make_string, make_array, make_integer, make_nil, free_value};

// A reply hiredis handed over: moved out, its root freed.
Value take(void* raw) {
  std::unique_ptr<Value> root(static_cast<Value*>(raw));
  return std::move(*root);
}

}  // namespace

void RedisConnection::FreeReader::operator()(redisReader* r) const { redisReaderFree(r); }

Error classify_reply_error(const std::string& message) {
  return {reply_error_passes(message) ? ErrorKind::Retryable : ErrorKind::Fatal, "redis: " + message};
}

RedisConnection::RedisConnection(RedisOptions opts) : opts_(std::move(opts)) {}
RedisConnection::~RedisConnection() = default;

void RedisConnection::drop() {
  transport_.reset();  // a broken or desynchronised connection is never reused
  reader_.reset();
}

Error RedisConnection::io_failure(const std::string& what) {
  std::string detail = failure_.empty() ? std::string("failed") : failure_;
  failure_.clear();
  drop();
  return {ErrorKind::Retryable, "redis " + opts_.host + ":" + std::to_string(opts_.port) + ": " + what + ": " + detail};
}

std::optional<Error> RedisConnection::ensure_connected() {
  if (transport_) return std::nullopt;
  std::string why;
  transport_ = Transport::open(opts_.host, opts_.port, opts_.tls, opts_.connectTimeoutMs, opts_.commandTimeoutMs, why);
  if (!transport_) return Error{ErrorKind::Retryable, why};
  heardFrom_ = false;
  reader_.reset(redisReaderCreateWithFunctions(&kValueHooks));
  if (!reader_) {
    drop();
    return Error{ErrorKind::Retryable, "redis: cannot allocate a reply reader"};
  }
  ++reconnects_;
  if (!opts_.password.empty()) {
    Command auth = opts_.user.empty() ? Command{"AUTH", opts_.password} : Command{"AUTH", opts_.user, opts_.password};
    auto r = run({auth}).front();
    if (!r.ok()) return r.error;
    if (r.value->is_error()) {
      drop();
      return Error{ErrorKind::Fatal, "redis AUTH failed: " + r.value->str};
    }
  }
  if (onConnect_ && !inOnConnect_) {
    inOnConnect_ = true;
    auto e = onConnect_(*this);
    inOnConnect_ = false;
    if (e) {
      drop();
      return e;
    }
  }
  return std::nullopt;
}

namespace {
void append_number(std::string& out, std::size_t n) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, end);
}
}  // namespace

std::optional<Error> RedisConnection::append_and_flush(const std::vector<Command>& cmds) {
  ++roundTrips_;
  commandsSent_ += static_cast<int64_t>(cmds.size());
  out_.clear();
  for (const auto& cmd : cmds) {  // RESP: *<args>\r\n then $<len>\r\n<arg>\r\n each
    out_ += '*';
    append_number(out_, cmd.size());
    out_ += "\r\n";
    for (const auto& a : cmd) {
      out_ += '$';
      append_number(out_, a.size());
      out_ += "\r\n";
      out_ += a;
      out_ += "\r\n";
    }
  }
  if (!transport_->write_all(out_.data(), out_.size())) {
    failure_ = transport_->why();
    if (transport_->tls()) {
      // A server that refuses the session (no client certificate) may close it before the first
      // write lands: its alert says why, when it arrived.
      if (auto alert = transport_->alert_after_failure(); !alert.empty()) failure_ = alert;
      else if (!heardFrom_ && opts_.tls.certFile.empty())
        failure_ += " (the server ended the TLS session before answering: does it require a client certificate?)";
    } else if (!heardFrom_ && !transport_->timed_out()) {
      failure_ += " before answering anything (does it require TLS? see --redis-tls)";  // as on a read
    }
    return io_failure("write");
  }
  if (out_.capacity() > (1u << 20)) std::string().swap(out_);  // a huge pipeline's buffer is not kept
  return std::nullopt;
}

bool RedisConnection::next_reply(void** raw) {
  for (;;) {
    if (redisReaderGetReply(reader_.get(), raw) != REDIS_OK) {
      failure_ = std::string("protocol error: ") + reader_->errstr;
      return false;
    }
    if (*raw != nullptr) return true;
    char buf[16384];
    const std::size_t n = transport_->read_some(buf, sizeof buf);
    if (n == 0) {
      failure_ = transport_->why();
      // A TLS-only port closes a plain-text client at its first bytes.
      if (!heardFrom_ && !transport_->tls() && !transport_->timed_out())
        failure_ += " before answering anything (does it require TLS? see --redis-tls)";
      return false;
    }
    heardFrom_ = true;
    if (redisReaderFeed(reader_.get(), buf, n) != REDIS_OK) {
      failure_ = std::string("protocol error: ") + reader_->errstr;
      return false;
    }
  }
}

std::vector<Result<Value>> RedisConnection::read_replies(std::size_t n) {
  std::vector<Result<Value>> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    void* raw = nullptr;
    if (!next_reply(&raw)) return std::vector<Result<Value>>(n, Result<Value>::failure(io_failure("read reply")));
    out.push_back(Result<Value>::success(take(raw)));
  }
  return out;
}

std::vector<Result<Value>> RedisConnection::run(const std::vector<Command>& cmds) {
  if (auto e = append_and_flush(cmds)) return std::vector<Result<Value>>(cmds.size(), Result<Value>::failure(*e));
  return read_replies(cmds.size());
}

int RedisConnection::fd() const { return transport_ ? transport_->fd() : -1; }

void RedisConnection::send(const std::vector<Command>& cmds) {
  // Connecting first: on_connect may run commands of its own on this connection.
  sendFailure_ = ensure_connected();
  sent_ = cmds.size();
  if (!sendFailure_) sendFailure_ = append_and_flush(cmds);
}

std::vector<Result<Value>> RedisConnection::receive() {
  const std::size_t n = sent_;
  sent_ = 0;
  if (sendFailure_) {
    auto e = *sendFailure_;
    sendFailure_.reset();
    return std::vector<Result<Value>>(n, Result<Value>::failure(e));
  }
  return read_replies(n);
}

Result<std::optional<Value>> RedisConnection::next_push(Millis waitMs) {
  using R = Result<std::optional<Value>>;
  if (!transport_) return R::failure({ErrorKind::Retryable, "redis: not connected (subscribe first)"});
  void* raw = nullptr;
  if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
    failure_ = std::string("protocol error: ") + reader_->errstr;
    return R::failure(io_failure("read push"));
  }
  if (raw == nullptr) {
    // Nothing parsed yet: wait for the socket, unless TLS already holds decrypted bytes.
    if (!transport_->buffered()) {
      pollfd p{transport_->fd(), POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::max<Millis>(0, waitMs)));
      if (n == 0) return R::success(std::nullopt);
      if (n < 0) {
        if (errno == EINTR) return R::success(std::nullopt);
        failure_ = std::strerror(errno);
        return R::failure(io_failure("poll"));
      }
    }
    char buf[16384];
    const std::size_t got = transport_->read_some(buf, sizeof buf);
    if (got == 0) {
      failure_ = transport_->why();
      return R::failure(io_failure("read push"));
    }
    if (redisReaderFeed(reader_.get(), buf, got) != REDIS_OK || redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      failure_ = std::string("protocol error: ") + reader_->errstr;
      return R::failure(io_failure("read push"));
    }
    if (raw == nullptr) return R::success(std::nullopt);  // part of a message so far
  }
  return R::success(take(raw));
}

bool store_answered(const std::vector<Result<Value>>& replies) {
  for (const auto& r : replies)
    if (!r.ok() || (r.value->is_error() && reply_error_says_store_down(r.value->str))) return false;
  return true;
}

std::vector<Result<Value>> RedisConnection::pipeline(const std::vector<Command>& cmds) {
  const auto& obs = opts_.observer;
  const uint64_t id = obs ? obs->call_began() : 0;
  send(cmds);
  auto out = receive();
  if (obs) obs->call_ended(id, store_answered(out));
  return out;
}

Result<Value> RedisConnection::command(const Command& cmd) { return pipeline({cmd}).front(); }

}  // namespace rsc::store

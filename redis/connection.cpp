#include "redis/connection.hpp"

#include <poll.h>

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

namespace rsc::store {
namespace {

timeval to_timeval(Millis ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

struct FreeReply {
  void operator()(void* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<void, FreeReply>;

Value convert(const redisReply* r) {
  Value v;
  switch (r->type) {
    case REDIS_REPLY_NIL: v.type = Value::Type::Nil; break;
    case REDIS_REPLY_INTEGER:
      v.type = Value::Type::Integer;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_STRING:
      v.type = Value::Type::String;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = Value::Type::Status;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = Value::Type::Error;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ARRAY:
      v.type = Value::Type::Array;
      v.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(convert(r->element[i]));
      break;
    default: v.type = Value::Type::Nil;
  }
  return v;
}

}  // namespace

void RedisConnection::Free::operator()(redisContext* c) const { redisFree(c); }

Error classify_reply_error(const std::string& message) {
  return {reply_error_passes(message) ? ErrorKind::Retryable : ErrorKind::Fatal, "redis: " + message};
}

RedisConnection::RedisConnection(RedisOptions opts) : opts_(std::move(opts)) {}
RedisConnection::~RedisConnection() = default;

Error RedisConnection::io_failure(const std::string& what) {
  std::string detail = ctx_ && ctx_->errstr[0] ? ctx_->errstr : std::strerror(errno);
  if (ctx_ && ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) detail = "timed out";
  ctx_.reset();  // a broken or desynchronised connection is never reused
  return {ErrorKind::Retryable,
          "redis " + opts_.host + ":" + std::to_string(opts_.port) + ": " + what + ": " + detail};
}

std::optional<Error> RedisConnection::ensure_connected() {
  if (ctx_) return std::nullopt;
  redisContext* c = redisConnectWithTimeout(opts_.host.c_str(), opts_.port, to_timeval(opts_.connectTimeoutMs));
  if (c == nullptr) return Error{ErrorKind::Retryable, "redis: cannot allocate a context"};
  ctx_.reset(c);
  if (c->err) return io_failure("connect");
  if (redisSetTimeout(c, to_timeval(opts_.commandTimeoutMs)) != REDIS_OK) return io_failure("set timeout");
  redisEnableKeepAlive(c);
  ++reconnects_;
  if (!opts_.password.empty()) {
    Command auth = opts_.user.empty() ? Command{"AUTH", opts_.password} : Command{"AUTH", opts_.user, opts_.password};
    auto r = run({auth}).front();
    if (!r.ok()) return r.error;
    if (r.value->is_error()) {
      ctx_.reset();
      return Error{ErrorKind::Fatal, "redis AUTH failed: " + r.value->str};
    }
  }
  if (onConnect_ && !inOnConnect_) {
    inOnConnect_ = true;
    auto e = onConnect_(*this);
    inOnConnect_ = false;
    if (e) {
      ctx_.reset();
      return e;
    }
  }
  return std::nullopt;
}

std::optional<Error> RedisConnection::append_and_flush(const std::vector<Command>& cmds) {
  ++roundTrips_;
  commandsSent_ += static_cast<int64_t>(cmds.size());
  for (const auto& cmd : cmds) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(cmd.size());
    lens.reserve(cmd.size());
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
      return io_failure("append");
  }
  int done = 0;
  while (!done)
    if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) return io_failure("write");
  return std::nullopt;
}

std::vector<Result<Value>> RedisConnection::read_replies(std::size_t n) {
  std::vector<Result<Value>> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr)
      return std::vector<Result<Value>>(n, Result<Value>::failure(io_failure("read reply")));
    ReplyPtr reply(raw);
    out.push_back(Result<Value>::success(convert(static_cast<redisReply*>(raw))));
  }
  return out;
}

std::vector<Result<Value>> RedisConnection::run(const std::vector<Command>& cmds) {
  if (auto e = append_and_flush(cmds)) return std::vector<Result<Value>>(cmds.size(), Result<Value>::failure(*e));
  return read_replies(cmds.size());
}

int RedisConnection::fd() const { return ctx_ ? ctx_->fd : -1; }

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
  if (!ctx_) return R::failure({ErrorKind::Retryable, "redis: not connected (subscribe first)"});
  void* raw = nullptr;
  if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return R::failure(io_failure("read push"));
  if (raw == nullptr) {
    // Nothing buffered: wait for the socket (a read timeout would leave hiredis' context unusable).
    pollfd p{ctx_->fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<Millis>(0, waitMs)));
    if (n == 0) return R::success(std::nullopt);
    if (n < 0) {
      if (errno == EINTR) return R::success(std::nullopt);
      return R::failure(io_failure("poll"));
    }
    if (redisBufferRead(ctx_.get()) != REDIS_OK) return R::failure(io_failure("read push"));
    if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return R::failure(io_failure("read push"));
    if (raw == nullptr) return R::success(std::nullopt);  // part of a message so far
  }
  ReplyPtr reply(raw);
  return R::success(convert(static_cast<redisReply*>(raw)));
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

// One synchronous Redis connection: a Transport (TCP or TLS) for the bytes and hiredis' RESP
// reader for the replies; connect and command timeouts, AUTH, reconnect after any I/O error,
// pipelining, and the one place where I/O and Redis errors become store::Error (retryable vs fatal).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/result.hpp"
#include "redis/transport.hpp"

struct redisReader;

namespace rsc::store {


// A reply, as hiredis' parser builds it (redis/connection.cpp: no redisReply tree to copy).
struct Value {
  enum class Type { Nil, Integer, String, Status, Error, Array };
  Type type = Type::Nil;
  long long integer = 0;
  std::string str;  // String, Status and Error
  std::vector<Value> elements;

  bool is_error() const { return type == Type::Error; }
  bool is_nil() const { return type == Type::Nil; }
};

using Command = std::vector<std::string>;

// Maps a Redis error reply to retryable or fatal (redis/result.hpp: reply_error_passes).
Error classify_reply_error(const std::string& message);
// What a CallObserver is told of a call: every reply came, and none says the store cannot serve now
// (redis/result.hpp: reply_error_says_store_down).
bool store_answered(const std::vector<Result<Value>>& replies);

class RedisConnection {
 public:
  explicit RedisConnection(RedisOptions opts);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // One command. Error replies come back as a Value of type Error (not as a failure): the caller
  // decides; I/O failures are Retryable failures and drop the connection for a fresh one next time.
  Result<Value> command(const Command& cmd);
  // Many commands, one round trip. On an I/O failure every result is that failure.
  std::vector<Result<Value>> pipeline(const std::vector<Command>& cmds);

  // A pipeline in two halves, so that a client can have several nodes work at once: send() writes
  // the commands (connecting first if need be) without waiting; receive() then reads their replies.
  // After a failed send(), receive() gives that failure for every command.
  void send(const std::vector<Command>& cmds);
  std::vector<Result<Value>> receive();

  // On a connection that subscribed (SUBSCRIBE, SSUBSCRIBE): the next message Redis pushes, or
  // std::nullopt when none came within `waitMs`. An I/O failure drops the connection (subscribe
  // again on the next one).
  Result<std::optional<Value>> next_push(Millis waitMs);

  // Called after every (re)connect, e.g. to load scripts. Its failure fails the connect.
  void on_connect(std::function<std::optional<Error>(RedisConnection&)> f) { onConnect_ = std::move(f); }
  bool connected() const { return transport_ != nullptr; }
  // The socket (to poll for a reply after send()), or -1 when not connected.
  int fd() const;
  const RedisOptions& options() const { return opts_; }
  int64_t reconnects() const { return reconnects_; }
  int64_t round_trips() const { return roundTrips_; }
  int64_t commands_sent() const { return commandsSent_; }

 private:
  std::optional<Error> ensure_connected();
  Error io_failure(const std::string& what);
  std::vector<Result<Value>> run(const std::vector<Command>& cmds);
  std::optional<Error> append_and_flush(const std::vector<Command>& cmds);
  std::vector<Result<Value>> read_replies(std::size_t n);
  std::size_t sent_ = 0;                // commands sent by send() whose replies receive() reads
  std::optional<Error> sendFailure_;    // why send() failed

  void drop();
  // Feeds the reader until it has a reply; false on an I/O or protocol failure.
  bool next_reply(void** raw);

  RedisOptions opts_;
  struct FreeReader {
    void operator()(redisReader* r) const;
  };
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<redisReader, FreeReader> reader_;  // hiredis' RESP parser, fed from transport_
  std::string out_;                                  // the commands being sent, in RESP
  std::string failure_;                              // why the last I/O failed
  bool heardFrom_ = false;                           // this connection has read a byte
  std::function<std::optional<Error>(RedisConnection&)> onConnect_;
  bool inOnConnect_ = false;
  int64_t reconnects_ = 0;
  int64_t roundTrips_ = 0;
  int64_t commandsSent_ = 0;
};

}  // namespace rsc::store

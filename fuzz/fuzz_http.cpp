// libFuzzer: a whole HTTP request through routing, auth, validation and the mapping to HTTP codes
// (http::handle_request) with a fake coordinator behind it. Every request is answered exactly once.
#include <cstddef>
#include <cstdint>
#include <string>

#include "http/api.hpp"

using namespace rsc;

namespace {
struct Fake : http::Backend {
  void heartbeat(const protocol::GroupKey&, protocol::HeartbeatRequest req,
                 std::function<void(protocol::HeartbeatResponse)> done) override {
    protocol::HeartbeatResponse r;
    r.responseTo = req.requestId;
    r.memberId = req.memberId;
    done(r);
  }
  void write_stream(const std::string& p, const protocol::StreamRequest& r, bool createOnly,
                    std::function<void(http::Answer<http::StreamWritten>)> done) override {
    done(http::Answer<http::StreamWritten>::success(
        {{p, r.shardCount.value_or(16), 1, r.keyStyle.value_or(protocol::KeyStyle::Plain), std::nullopt},
         createOnly ? http::StreamWritten::Outcome::Exists : http::StreamWritten::Outcome::Created}));
  }
  void producer_routing(const protocol::GroupKey& k,
                        std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) override {
    done(http::Answer<std::optional<protocol::StreamMetadata>>::success(
        protocol::StreamMetadata{k.streamPrefix, 8, 1, protocol::KeyStyle::HashTag, std::nullopt}));
  }
  void get_stream(const std::string&, std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) override {
    done(http::Answer<std::optional<protocol::StreamMetadata>>::success(std::nullopt));
  }
  void list_groups(const std::string&, const http::GroupPage&, std::function<void(http::Answer<http::StreamGroups>)> done) override {
    done(http::Answer<http::StreamGroups>::success({}));
  }
  void list_streams(std::function<void(http::Answer<std::vector<std::string>>)> done) override {
    done(http::Answer<std::vector<std::string>>::success({"orders"}));
  }
  void audit(const std::string&) override {}
  void describe(const protocol::GroupKey&, bool, std::function<void(http::Answer<std::optional<std::string>>)> done) override {
    done(http::Answer<std::optional<std::string>>::failure(http::Problem::Kind::Unavailable, "down"));
  }
  void remove_member(const protocol::GroupKey&, const std::string&, std::function<void(http::Answer<bool>)> done) override {
    done(http::Answer<bool>::success(false));
  }
  void configure_group(const protocol::GroupKey&, protocol::GroupConfig,
                       std::function<void(http::Answer<protocol::GroupConfigSet>)> done) override {
    done(http::Answer<protocol::GroupConfigSet>::success({}));
  }
  void post_target(const protocol::GroupKey&, protocol::PostedTarget,
                   std::function<void(http::Answer<protocol::TargetPosted>)> done) override {
    done(http::Answer<protocol::TargetPosted>::success({}));
  }
  void delete_group(const protocol::GroupKey&, bool, std::function<void(http::Answer<http::Deletion>)> done) override {
    done(http::Answer<http::Deletion>::success(http::Deletion::HasLiveMembers));
  }
  void reset_offsets(const protocol::GroupKey&, std::string, bool,
                     std::function<void(http::Answer<http::OffsetsReset>)> done) override {
    done(http::Answer<http::OffsetsReset>::success({}));
  }
  void dead_letters(const protocol::GroupKey&, int64_t,
                    std::function<void(http::Answer<protocol::DeadLetterPage>)> done) override {
    done(http::Answer<protocol::DeadLetterPage>::success({}));
  }
  void redrive(const protocol::GroupKey&, std::vector<std::string>, int64_t,
               std::function<void(http::Answer<protocol::DeadLetterMove>)> done) override {
    done(http::Answer<protocol::DeadLetterMove>::success({}));
  }
  void discard_dead_letters(const protocol::GroupKey&, std::vector<std::string>, int64_t,
                            std::function<void(http::Answer<protocol::DeadLetterMove>)> done) override {
    done(http::Answer<protocol::DeadLetterMove>::success({}));
  }
  void ready(std::function<void(bool, std::string)> done) override { done(true, ""); }
  std::string metrics_text() override { return ""; }
  Timings timings() const override { return {3000, 60000, 15000}; }
};
}  // namespace

// Input: one byte picks the method, one the content type, one the auth header; then the target up
// to the first newline; the rest is the body.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const char* const methods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", ""};
  static const char* const types[] = {"application/json", "text/plain", "", "application/json; charset=utf-8"};
  static const char* const auths[] = {"", "Bearer admin-token-0123456789", "Bearer member-token-0123456789", "Bearer x"};
  if (size < 3) return 0;
  http::HttpRequest req;
  req.method = methods[data[0] % 7];
  req.contentType = types[data[1] % 4];
  req.authorization = auths[data[2] % 4];
  const std::string rest(reinterpret_cast<const char*>(data + 3), size - 3);
  const auto nl = rest.find('\n');
  req.target = rest.substr(0, nl);
  req.body = nl == std::string::npos ? std::string() : rest.substr(nl + 1);
  http::AuthConfig auth;
  if (data[2] & 4) {
    auth.tokens.push_back({"admin-token-0123456789", "admin", {"*"}, {"*"}, "fuzz-admin"});
    auth.tokens.push_back({"member-token-0123456789", "member", {"o*"}, {"b*"}, "fuzz-member"});
    auth.metricsPublic = (data[2] & 8) != 0;
  }
  Fake backend;
  int answers = 0;
  http::handle_request(req, backend, auth, [&](http::HttpResponse r) {
    ++answers;
    if (r.status < 200 || r.status > 599) __builtin_trap();
  });
  if (answers != 1) __builtin_trap();
  (void)http::route(req.method, req.target);
  return 0;
}

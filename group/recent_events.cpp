#include "group/recent_events.hpp"

#include <cstring>

namespace rsc::group {
namespace {

// A packed record: u32 length of the whole record, i64 atMs, i32 groupEpoch, u8 kind,
// u8 member length, member, u16 shard count, i32 shards, u16 detail length, detail.
// Native byte order: the buffer never leaves the process.
template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
template <typename T>
T take(const std::string& in, std::size_t& at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return v;
}

}  // namespace

RecentEvents::RecentEvents(std::size_t capacity, std::size_t bytes) : capacity_(capacity), bytes_(bytes) {}

bool RecentEvents::worth_showing(Event::Kind k) {
  return k != Event::Kind::TARGET_COMPUTED && k != Event::Kind::EPOCH_ADVANCED;
}

void RecentEvents::record(const std::vector<Event>& events, int32_t groupEpoch, Millis now) {
  if (capacity_ == 0 || bytes_ == 0) return;
  for (const auto& e : events)
    if (worth_showing(e.kind)) push(e, groupEpoch, now);
}

void RecentEvents::push(const Event& e, int32_t groupEpoch, Millis now) {
  std::string rec;
  put<uint32_t>(rec, 0);  // the length, filled in below
  put<int64_t>(rec, now);
  put<int32_t>(rec, groupEpoch);
  put<uint8_t>(rec, static_cast<uint8_t>(e.kind));
  const std::string member = e.member.substr(0, 255);
  put<uint8_t>(rec, static_cast<uint8_t>(member.size()));
  rec += member;
  const std::size_t nShards = std::min(e.shards.size(), kMaxShards);
  put<uint16_t>(rec, static_cast<uint16_t>(nShards));
  for (std::size_t i = 0; i < nShards; ++i) put<int32_t>(rec, e.shards[i]);
  std::string detail = e.detail;
  if (nShards < e.shards.size())
    detail = "(" + std::to_string(e.shards.size() - nShards) + " more shards) " + detail;
  if (detail.size() > kMaxText) detail = detail.substr(0, kMaxText - 3) + "...";
  put<uint16_t>(rec, static_cast<uint16_t>(detail.size()));
  rec += detail;
  const auto len = static_cast<uint32_t>(rec.size());
  std::memcpy(rec.data(), &len, sizeof len);
  if (rec.size() > bytes_) return;  // a budget smaller than one event keeps none
  while (count_ > 0 && (count_ >= capacity_ || buf_.size() + rec.size() > bytes_)) pop_oldest();
  if (buf_.capacity() < bytes_) buf_.reserve(bytes_);  // once: the buffer never grows past it
  buf_ += rec;
  ++count_;
}

void RecentEvents::pop_oldest() {
  uint32_t len = 0;
  std::memcpy(&len, buf_.data(), sizeof len);
  buf_.erase(0, len);
  --count_;
}

std::vector<RecentEvent> RecentEvents::items() const {
  std::vector<RecentEvent> out;
  out.reserve(count_);
  std::size_t at = 0;
  while (at < buf_.size()) {
    const std::size_t start = at;
    const auto len = take<uint32_t>(buf_, at);
    RecentEvent r;
    r.atMs = take<int64_t>(buf_, at);
    r.groupEpoch = take<int32_t>(buf_, at);
    r.event.kind = static_cast<Event::Kind>(take<uint8_t>(buf_, at));
    const auto memberLen = take<uint8_t>(buf_, at);
    r.event.member.assign(buf_, at, memberLen);
    at += memberLen;
    const auto nShards = take<uint16_t>(buf_, at);
    for (uint16_t i = 0; i < nShards; ++i) r.event.shards.push_back(take<int32_t>(buf_, at));
    const auto detailLen = take<uint16_t>(buf_, at);
    r.event.detail.assign(buf_, at, detailLen);
    at = start + len;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace rsc::group

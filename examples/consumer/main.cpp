// example-consumer: writes COUNT records to a sharded stream with rsc::member::Producer, then reads
// them back as one member of GROUP with rsc::member::Runtime, and exits 0 once it has seen every
// one (1 if that takes longer than 30 s). What a team's own service does, in a few lines.
//   example-consumer COORDINATOR_URL REDIS_HOST REDIS_PORT STREAM GROUP COUNT
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <rsc/member/producer.hpp>
#include <rsc/member/runtime.hpp>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: example-consumer COORDINATOR_URL REDIS_HOST REDIS_PORT STREAM GROUP COUNT\n";
    return 2;
  }
  const std::string url = argv[1], stream = argv[4], group = argv[5];
  const int count = std::atoi(argv[6]);

  rsc::member::ProducerOptions po;
  po.coordinatorUrl = url;
  po.redis.host = argv[2];
  po.redis.port = std::atoi(argv[3]);
  po.streamPrefix = stream;
  po.group = group;
  rsc::member::Producer producer(po);
  std::vector<rsc::member::ProducerRecord> records;
  for (int i = 0; i < count; ++i) {
    const std::string key = "order-" + std::to_string(i % 7);
    records.push_back({key, {{"key", key}, {"seq", std::to_string(i)}}});
  }
  const auto sent = producer.send(records);
  if (!sent.ok) {
    std::cerr << "example-consumer: produce failed: " << sent.error << "\n";
    return 1;
  }

  std::mutex mu;
  std::set<std::string> seen;
  rsc::member::RuntimeOptions o;
  o.coordinatorUrl = url;
  o.redis = po.redis;
  o.streamPrefix = stream;
  o.group = group;
  o.memberId = "example-1";
  o.concurrency = 2;
  rsc::member::Runtime rt(o, [&](const rsc::member::Record& r, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(r.field("seq"));
  });
  rt.start();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (static_cast<int>(seen.size()) >= count) break;
    }
    if (std::chrono::steady_clock::now() > until) {
      std::cerr << "example-consumer: saw " << seen.size() << " of " << count << " records in 30 s\n";
      rt.shutdown();
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  rt.shutdown();
  std::cout << "example-consumer: produced " << sent.written << " and consumed " << seen.size() << " records of "
            << stream << "/" << group << "\n";
  return 0;
}

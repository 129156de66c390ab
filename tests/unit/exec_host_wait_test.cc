// The engine's host waits on the CPU (engine/src/exec.h): bounded by the time without a
// collective completing, not by one fixed timeout. A step's queue of healthy reductions
// behind a slow rank outlasted the fixed timeout and failed the job naming no collective.
#include "engine/src/exec.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "zdp/comm.h"
#include "zdp/device.h"
#include "zdp/store.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

class ExecHostWait : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = create_cpu_device();
    comm_ = create_gloo_communicator(store_, 0, 1, *device_, CommOptions{}).value();
    exec_ = Exec::create(*device_, 300ms, comm_.get()).value();
    slow_ = device_->create_stream("slow work").value();
    reached_ = device_->create_event().value();
  }
  // Work on another stream that takes `ms`, then the event the wait is for.
  void slow_work(int ms) {
    ASSERT_TRUE(slow_->enqueue_host("slow", [ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return Status::Ok();
    }).ok());
    ASSERT_TRUE(slow_->record(*reached_).ok());
  }
  InMemoryStore store_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Exec> exec_;
  std::unique_ptr<Stream> slow_;
  std::unique_ptr<Event> reached_;
};

// 1.2 s of waiting with a 300 ms timeout, while a collective completes every 100 ms.
TEST_F(ExecHostWait, AWaitWhileCollectivesCompleteOutlastsTheTimeout) {
  slow_work(1200);
  std::atomic<bool> done{false};
  std::thread collectives([&] {
    std::unique_ptr<Stream> s = device_->create_stream("collectives").value();
    float x = 1;
    while (!done.load()) {
      if (!comm_->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, *s).ok() || !s->synchronize(5s).ok()) return;
      std::this_thread::sleep_for(100ms);
    }
  });
  const Status s = exec_->compute_after(*reached_, "test wait");
  done = true;
  collectives.join();
  EXPECT_TRUE(s.ok()) << s.to_string();
}

// Without a collective completing, the wait fails after the timeout, saying so.
TEST_F(ExecHostWait, AWaitWithoutProgressFailsAfterTheTimeout) {
  slow_work(1500);
  const auto start = std::chrono::steady_clock::now();
  const Status s = exec_->compute_after(*reached_, "test wait");
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.to_string();
  EXPECT_NE(s.message().find("test wait: not reached after 0.3 s in which no collective completed"), std::string::npos)
      << s.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1200ms);
  EXPECT_TRUE(slow_->synchronize(5s).ok());
}

}  // namespace
}  // namespace zdp

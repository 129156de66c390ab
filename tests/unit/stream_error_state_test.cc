// The sticky error state of a stream (runtime/internal/stream_error_state.h): failures
// pinned to positions, and failures inherited through waits between streams, which is
// how the CUDA device carries a communication failure to the compute stream without a
// host callback (pure C++: tested here, on the CPU).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "runtime/internal/stream_error_state.h"

namespace zdp::cuda {
namespace {

using State = std::shared_ptr<StreamErrorState>;
State make(const char* name) { return std::make_shared<StreamErrorState>(name); }
void work(StreamErrorState& s, int n) {
  for (int i = 0; i < n; ++i) (void)s.next_position();
}
const Status kBroken(StatusCode::kTimeout, "comm: all_reduce #3 timed out");

TEST(StreamErrorState, FailureIsPinnedToItsPosition) {
  State s = make("compute");
  work(*s, 5);
  s->fail(3, kBroken);
  EXPECT_TRUE(s->error_before(3).ok());  // an event recorded before the failed work
  EXPECT_EQ(s->error_before(4).code(), StatusCode::kTimeout);
  EXPECT_EQ(s->error().message(), kBroken.message());
  s->fail(1, Status(StatusCode::kInternal, "later report of earlier work"));
  EXPECT_EQ(s->error().message(), kBroken.message()) << "the first status is kept";
  EXPECT_FALSE(s->error_before(2).ok()) << "the failure point moves earlier";
}

TEST(StreamErrorState, AWaitInheritsAFailureOfTheAwaitedWorkOnly) {
  State comm = make("comm"), compute = make("compute");
  work(*comm, 10);       // collectives 0..9
  work(*compute, 4);     // compute work 0..3
  compute->depend_on(comm, 6);  // compute waits for comm's work below 6 (the wait: position 4)
  work(*compute, 4);     // compute work 5..8
  EXPECT_TRUE(compute->error().ok());
  comm->fail(8, kBroken);  // after what compute waited for: compute is unaffected
  EXPECT_TRUE(compute->error().ok());
  comm->fail(5, kBroken);  // moved before it (a report of earlier work): now compute fails
  EXPECT_TRUE(compute->error_before(4).ok()) << "work issued before the wait is not affected";
  EXPECT_TRUE(compute->error_before(5).ok() == false) << "the first task after the wait (position 5) is";
  EXPECT_EQ(compute->error_before(5).message(), kBroken.message());
  EXPECT_EQ(compute->error().message(), kBroken.message());
}

TEST(StreamErrorState, FailuresTravelOverSeveralHopsAndCyclesEnd) {
  State a = make("a"), b = make("b"), c = make("c");
  work(*a, 3);
  b->depend_on(a, 3);
  work(*b, 3);
  c->depend_on(b, 3);
  work(*c, 1);
  a->depend_on(c, 1);  // a cycle of waits: the walk must still end
  work(*a, 2);
  EXPECT_TRUE(c->error().ok());
  a->fail(1, kBroken);
  EXPECT_EQ(c->error().message(), kBroken.message());
  EXPECT_EQ(b->error().message(), kBroken.message());
}

TEST(StreamErrorState, LinksStayBoundedAndMergingIsConservative) {
  State comm = make("comm"), compute = make("compute");
  for (int i = 0; i < 10 * StreamErrorState::kMaxLinks; ++i) {
    work(*comm, 1);
    work(*compute, 1);
    compute->depend_on(comm, comm->position());
  }
  const uint64_t before = compute->position();
  // Waiting again with nothing issued in between, or for less, adds nothing.
  compute->depend_on(comm, comm->position());
  compute->depend_on(comm, 1);
  EXPECT_EQ(compute->position(), before);
  comm->fail(0, kBroken);
  EXPECT_FALSE(compute->error().ok());
  EXPECT_FALSE(compute->error_before(compute->position()).ok());
  // Waiting on itself never links.
  State solo = make("solo");
  solo->depend_on(solo, 5);
  EXPECT_TRUE(solo->error().ok());
}

// The engine's two streams wait for each other in turn, every bucket of every step: the
// walk through links must stay cheap (one branch per stream waited for, not per link).
TEST(StreamErrorState, StreamsWaitingForEachOtherStayCheapToQuery) {
  State comm = make("comm"), compute = make("compute");
  for (int i = 0; i < 2000; ++i) {
    work(*compute, 2);
    comm->depend_on(compute, compute->position());
    work(*comm, 1);
    compute->depend_on(comm, comm->position());
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(compute->error().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  comm->fail(comm->position() - 1, kBroken);
  EXPECT_EQ(compute->error().message(), kBroken.message());
}

}  // namespace
}  // namespace zdp::cuda

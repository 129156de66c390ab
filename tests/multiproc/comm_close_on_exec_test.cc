// A rank's child process inherits none of the communicator's sockets or epoll descriptors
// (runtime/src/comm/close_on_exec.h): a child that outlived its rank would otherwise hold
// the rank's connections open, and the peers would wait out the collective timeout. Nor
// does it inherit SIGPIPE ignored (core/internal/broken_pipe.h).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/src/comm/close_on_exec.h"
#include "testing/fork_ranks.h"
#include "zdp/comm.h"
#include "zdp/device.h"

namespace zdp {
namespace {

using namespace std::chrono_literals;

// What a child shell inherited, one readlink per descriptor ("socket:[123]", "pipe:[4]").
std::string inherited_by_a_child() {
  FILE* p = ::popen("sh -c 'for f in /proc/$$/fd/*; do readlink \"$f\"; done'", "r");
  if (p == nullptr) return "popen failed";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  ::pclose(p);
  return out;
}

// The mask of signals a child shell ignores, as /proc shows it (16 hex digits).
std::string signals_a_child_ignores() {
  FILE* p = ::popen("sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status", "r");
  if (p == nullptr) return "popen failed";
  std::string out;
  char buf[64];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  ::pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(CloseOnExec, AChildInheritsNoneOfGloosDescriptors) {
  const auto results = testing::fork_ranks(3, [](int rank, int world, Store& store) -> Status {
    std::unique_ptr<Device> device = create_cpu_device();
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device->create_stream("comm"));
    CommOptions options;
    options.timeout = 60s;
    ZDP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, create_gloo_communicator(store, rank, world, *device, options));
    float x = 1;
    ZDP_RETURN_IF_ERROR(comm->all_reduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, *stream, 1));
    ZDP_RETURN_IF_ERROR(stream->synchronize(60s));
    if (x != 3.0f) return Status(StatusCode::kInternal, "all_reduce gave " + std::to_string(x));
    const std::string inherited = inherited_by_a_child();
    // Nor SIGPIPE ignored (core/internal/broken_pipe.h): connecting Gloo catches it, and a
    // child that inherited SIG_IGN never stopped when its reader went (`producer | head`).
    const std::string ignored = signals_a_child_ignores();
    if (ignored.empty() || (std::strtoull(ignored.c_str(), nullptr, 16) >> (SIGPIPE - 1)) & 1) {
      return Status(StatusCode::kInternal, "rank " + std::to_string(rank) + "'s child ignores SIGPIPE (SigIgn " + ignored + ")");
    }
    if (inherited.find("socket:") != std::string::npos || inherited.find("eventpoll") != std::string::npos) {
      return Status(StatusCode::kInternal, "rank " + std::to_string(rank) + "'s child inherited:\n" + inherited);
    }
    return comm->barrier(*stream);
  });
  EXPECT_EQ(testing::describe_failures(results), "");
}

// Only descriptors opened after the snapshot are marked; older ones keep their flags.
TEST(CloseOnExec, MarksTheDescriptorsOpenedSinceTheSnapshotOnly) {
  int old_pipe[2], new_pipe[2];
  ASSERT_EQ(::pipe(old_pipe), 0);
  const NewDescriptorsCloseOnExec snapshot;
  ASSERT_EQ(::pipe(new_pipe), 0);
  EXPECT_EQ(snapshot.mark(), 2);
  for (int fd : new_pipe) EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << fd;
  for (int fd : old_pipe) EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << fd;
  EXPECT_EQ(snapshot.mark(), 0);  // already marked
  for (int fd : {old_pipe[0], old_pipe[1], new_pipe[0], new_pipe[1]}) ::close(fd);
}

}  // namespace
}  // namespace zdp

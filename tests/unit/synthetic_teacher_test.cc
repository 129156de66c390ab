// The mlp's synthetic data (trainer/data/source.cc): its teacher network (model.vocab_size
// x 32 floats) is made once for both splits, and a teacher the host cannot hold is an
// error naming model.vocab_size. Each split made its own copy, and a failed allocation
// ended the rank with "terminate called ... std::bad_alloc" (signal 6), naming nothing.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "trainer/data/source.h"

namespace zdp::trainer {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // they reserve terabytes of address space
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// This process's address space (VmSize), bytes.
long long address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long long kib = 0;
  while (status >> key) {
    if (key == "VmSize:") {
      status >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

Config mlp(int64_t classes) {
  Config c;
  c.model.kind = ModelKind::kMlp;
  c.model.d_model = 4;
  c.model.vocab_size = classes;
  return c;
}

// Runs `body` in a child whose address space may grow by `headroom` bytes; its exit code
// (128 + signal when killed).
template <typename Body>
int in_child_with_headroom(long long headroom, Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const long long now = address_space_bytes();
    const rlimit limit{static_cast<rlim_t>(now + headroom), static_cast<rlim_t>(now + headroom)};
    if (now < 0 || ::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(90);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(SyntheticTeacher, BothSplitsShareOneTeacher) {
  if (kSanitized) GTEST_SKIP() << "address-space limits and sanitizers do not mix";
  // 2^22 classes: a 512 MiB teacher. 768 MiB of headroom hold one, not two.
  const int code = in_child_with_headroom(768ll << 20, [] {
    const Config c = mlp(int64_t{1} << 22);
    StatusOr<std::unique_ptr<DataSource>> train = make_source(c, Split::kTrain);
    if (!train.ok()) return 1;
    StatusOr<std::unique_ptr<DataSource>> val = make_source(c, Split::kVal);
    if (!val.ok()) return 2;
    Batch b;
    return (*val)->fill({0, 1}, &b).ok() && b.labels.size() == 2 ? 0 : 3;
  });
  EXPECT_EQ(code, 0) << "1: the first teacher did not fit; 2: a second one was made; 3: fill failed; 134: bad_alloc";
}

TEST(SyntheticTeacher, ATeacherTooLargeForTheHostIsAnErrorNamingTheKey) {
  if (kSanitized) GTEST_SKIP() << "address-space limits and sanitizers do not mix";
  const int code = in_child_with_headroom(256ll << 20, [] {
    StatusOr<std::unique_ptr<DataSource>> train = make_source(mlp(int64_t{1} << 26), Split::kTrain);  // 8 GiB
    if (train.ok()) return 1;
    const std::string m = train.status().message();
    std::fprintf(stderr, "%s\n", m.c_str());
    return train.status().code() == StatusCode::kOutOfMemory && m.find("model.vocab_size") != std::string::npos &&
                   m.find("8.0 GiB") != std::string::npos
               ? 0
               : 2;
  });
  EXPECT_EQ(code, 0) << "1: made; 2: another error; 134: bad_alloc ended the process";
}

}  // namespace
}  // namespace zdp::trainer

// rank_probe: the program the launcher tests run as their ranks. It checks the launch
// environment, meets the other ranks through the store, does one all-reduce through the
// Gloo communicator, and then misbehaves on request (exit code, SIGKILL, hang at
// rendezvous, ignore SIGTERM) so that the tests can watch the launcher react.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "zdp/comm.h"
#include "zdp/device.h"
#include "zdp/launch_env.h"

namespace {

struct Args {
  int fail_rank = -1, exit_code = 7, kill_rank = -1, hang_rank = -1, fail_attempt = -1;
  int sleep_ms = 0;
  bool ignore_sigterm = false;
};

int fail(const std::string& why) {
  std::printf("probe error: %s\n", why.c_str());
  std::fflush(stdout);
  return 10;
}

int run(const Args& a) {
  zdp::StatusOr<zdp::LaunchEnv> env = zdp::read_launch_env();
  if (!env.ok()) return fail(env.status().to_string());
  const int r = env->rank;
  if (env->config_path.empty() || ::access(env->config_path.c_str(), R_OK) != 0) {
    return fail("ZDP_CONFIG '" + env->config_path + "' is not readable");
  }
  if (env->local_rank != r % env->local_world_size) return fail("LOCAL_RANK does not follow RANK");
  if (a.ignore_sigterm) ::signal(SIGTERM, SIG_IGN);
  if (r == a.hang_rank) {  // stuck before it reaches the rendezvous (e.g. a deadlock)
    std::printf("probe rank %d hangs before the rendezvous\n", r);
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  auto store = zdp::connect_job_store(*env, std::chrono::seconds(30));
  if (!store.ok()) return fail(store.status().to_string());
  // Meet: everyone checks in, everyone waits for everyone.
  std::vector<std::string> keys;
  for (int q = 0; q < env->world_size; ++q) keys.push_back("probe/here/" + std::to_string(q));
  if (!(*store)->set(keys[static_cast<size_t>(r)], "1").ok()) return fail("store set");
  if (zdp::Status s = (*store)->wait(keys, std::chrono::seconds(30)); !s.ok()) return fail(s.to_string());

  auto device = zdp::create_cpu_device();
  auto stream = device->create_stream("comm");
  zdp::CommOptions copts;
  copts.timeout = std::chrono::seconds(30);
  auto comm = zdp::create_gloo_communicator(**store, r, env->world_size, *device, copts);
  if (!comm.ok()) return fail(comm.status().to_string());
  if (!zdp::announce_ready(**store, r).ok()) return fail("announce_ready");
  int64_t v = r + 1;
  (void)(*comm)->all_reduce(&v, &v, 1, zdp::DType::kI64, zdp::ReduceOp::kSum, **stream);
  if (zdp::Status s = (*stream)->synchronize(std::chrono::seconds(30)); !s.ok()) return fail(s.to_string());
  const int64_t k = env->world_size;
  if (v != k * (k + 1) / 2) return fail("all_reduce gave " + std::to_string(v));
  std::printf("probe rank %d/%d ok (local %d/%d, attempt %d, sum %lld)\n", r, env->world_size, env->local_rank,
              env->local_world_size, env->attempt, static_cast<long long>(v));
  std::fflush(stdout);

  if (r == a.kill_rank) ::raise(SIGKILL);
  if (r == a.fail_rank && (a.fail_attempt < 0 || a.fail_attempt == env->attempt)) {
    std::printf("probe rank %d exiting with %d\n", r, a.exit_code);
    std::fflush(stdout);
    return a.exit_code;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(a.sleep_ms));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc || (i < argc && std::strcmp(argv[i], "--ignore-sigterm") == 0); ++i) {
    const std::string k = argv[i];
    if (k == "--ignore-sigterm") { a.ignore_sigterm = true; continue; }
    const int v = std::atoi(argv[++i]);
    if (k == "--fail-rank") a.fail_rank = v;
    else if (k == "--exit-code") a.exit_code = v;
    else if (k == "--kill-rank") a.kill_rank = v;
    else if (k == "--hang-rank") a.hang_rank = v;
    else if (k == "--fail-attempt") a.fail_attempt = v;
    else if (k == "--sleep-ms") a.sleep_ms = v;
    // --tag <x>: ignored; lets a test find its processes by command line
  }
  return run(a);
}

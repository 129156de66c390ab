// fork_ranks: K rank processes around an in-process TCP store server.
#include "testing/fork_ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <thread>

#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp::testing {

std::string RankResult::describe() const {
  if (timed_out) return "rank " + std::to_string(rank) + ": still running at the deadline, killed";
  if (signal != 0) return "rank " + std::to_string(rank) + ": killed by signal " + std::to_string(signal);
  return "rank " + std::to_string(rank) + ": exit " + std::to_string(exit_code);
}

namespace {

[[noreturn]] void run_child(int rank, int world_size, int port, const RankBody& body, const ForkOptions& options) {
  set_process_identity(rank, world_size);
  int code = 0;
  try {
    auto client = TcpStoreClient::connect("127.0.0.1", port, options.connect_timeout);
    Status status = client.ok() ? body(rank, world_size, **client) : client.status();
    if (!status.ok()) {
      ZDP_LOG(kError) << "rank body failed: " << status.to_string();
      code = 1;
    }
  } catch (const std::exception& e) {
    ZDP_LOG(kError) << "rank body threw: " << e.what();
    code = 2;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // _exit: the child must not run the parent's atexit handlers or test-framework teardown.
  ::_exit(code);
}

}  // namespace

std::vector<RankResult> fork_ranks(int world_size, const RankBody& body, const ForkOptions& options) {
  std::vector<RankResult> results(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) results[static_cast<size_t>(r)].rank = r;

  auto server = TcpStoreServer::start(TcpStoreServerOptions{});
  if (!server.ok()) {
    for (auto& r : results) r.exit_code = 100;
    ZDP_LOG(kError) << "fork_ranks: cannot start the store: " << server.status().to_string();
    return results;
  }
  const int port = (*server)->port();

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(static_cast<size_t>(world_size), -1);
  for (int r = 0; r < world_size; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) run_child(r, world_size, port, body, options);
    pids[static_cast<size_t>(r)] = pid;
    if (pid < 0) results[static_cast<size_t>(r)].exit_code = 101;
  }

  const auto deadline = std::chrono::steady_clock::now() + options.deadline;
  int running = 0;
  for (pid_t p : pids) running += p > 0 ? 1 : 0;
  while (running > 0) {
    // Only our own children: the caller may have other child processes.
    bool reaped = false;
    for (int r = 0; r < world_size; ++r) {
      pid_t& pid = pids[static_cast<size_t>(r)];
      if (pid <= 0) continue;
      int wstatus = 0;
      if (::waitpid(pid, &wstatus, WNOHANG) != pid) continue;
      RankResult& res = results[static_cast<size_t>(r)];
      if (WIFEXITED(wstatus)) res.exit_code = WEXITSTATUS(wstatus);
      if (WIFSIGNALED(wstatus)) res.signal = WTERMSIG(wstatus);
      pid = -1;
      --running;
      reaped = true;
    }
    if (reaped) continue;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (int r = 0; r < world_size; ++r) {
        if (pids[static_cast<size_t>(r)] <= 0) continue;
        ::kill(pids[static_cast<size_t>(r)], SIGKILL);
        ::waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
        results[static_cast<size_t>(r)].timed_out = true;
        pids[static_cast<size_t>(r)] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  (*server)->stop();
  return results;
}

std::string describe_failures(const std::vector<RankResult>& results) {
  std::string out;
  for (const RankResult& r : results) {
    if (!r.ok()) out += r.describe() + "\n";
  }
  return out;
}

}  // namespace zdp::testing

// fork_ranks: K rank processes and a store-server process, all forked from a caller that
// must be single-threaded, so each child starts with no lock held by a thread it lacks.
#include "testing/fork_ranks.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <thread>
#include <vector>

#include "zdp/log.h"
#include "zdp/tcp_store.h"

namespace zdp::testing {

std::string RankResult::describe() const {
  const std::string who = "rank " + std::to_string(rank) + ": ";
  if (!error.empty()) return who + error;
  if (timed_out) return who + "still running at the deadline, killed";
  if (signal != 0) return who + "killed by signal " + std::to_string(signal);
  return who + "exit " + std::to_string(exit_code);
}

namespace {

// ThreadSanitizer's runtime starts a background thread of its own at the first
// pthread_create, and makes fork safe around it: it is then the oldest other thread, and
// not the caller's.
#if defined(__SANITIZE_THREAD__)
constexpr bool kRuntimeThread = true;
#else
constexpr bool kRuntimeThread = false;
#endif

// The threads of this process but the calling one, as "tid (name)"; empty when it is alone.
std::string other_threads() {
  const long self = static_cast<long>(::gettid());
  std::vector<long> tids;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return "";  // no /proc: nothing to check against
  while (const dirent* e = ::readdir(dir)) {
    const std::string tid = e->d_name;
    if (tid == "." || tid == "..") continue;
    const long id = std::strtol(tid.c_str(), nullptr, 10);
    if (id != self) tids.push_back(id);
  }
  ::closedir(dir);
  std::sort(tids.begin(), tids.end());
  if (kRuntimeThread && !tids.empty()) tids.erase(tids.begin());
  std::string out;
  int count = 0;
  for (const long id : tids) {
    std::string name;
    std::ifstream("/proc/self/task/" + std::to_string(id) + "/comm") >> name;
    if (++count <= 8) out += (out.empty() ? "" : ", ") + std::to_string(id) + " (" + name + ")";
  }
  if (count > 8) out += " and " + std::to_string(count - 8) + " more";
  return count == 0 ? "" : std::to_string(count) + " other thread(s): " + out;
}

void mark_all(std::vector<RankResult>& results, const std::string& error) {
  for (RankResult& r : results) r.error = error;
}

// The store server's process: serves until `lifeline` reads EOF (the caller closed its
// end, or died), so no rank outlives its store by accident and no server outlives the test.
[[noreturn]] void run_store_server(int port_fd, int lifeline) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int port = -1;
  auto server = TcpStoreServer::start(TcpStoreServerOptions{});
  if (server.ok()) {
    port = (*server)->port();
  } else {
    ZDP_LOG(kError) << "fork_ranks: cannot start the store: " << server.status().to_string();
  }
  if (::write(port_fd, &port, sizeof(port)) != static_cast<ssize_t>(sizeof(port))) port = -1;
  ::close(port_fd);
  char byte;
  while (port > 0 && ::read(lifeline, &byte, 1) < 0 && errno == EINTR) {
  }
  if (server.ok()) (*server)->stop();
  ::_exit(port > 0 ? 0 : 1);
}

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

// Forks the store server; its pid and port, or the reason it did not start.
struct StoreProcess {
  pid_t pid = -1;
  int port = -1;
  int lifeline = -1;  // our end: closing it stops the server
};

StatusOr<StoreProcess> start_store_process() {
  int port_pipe[2], life_pipe[2];
  if (::pipe2(port_pipe, O_CLOEXEC) != 0) return Status(StatusCode::kIoError, std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(life_pipe, O_CLOEXEC) != 0) {
    ::close(port_pipe[0]);
    ::close(port_pipe[1]);
    return Status(StatusCode::kIoError, std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(port_pipe[0]);
    ::close(life_pipe[1]);
    run_store_server(port_pipe[1], life_pipe[0]);
  }
  ::close(port_pipe[1]);
  ::close(life_pipe[0]);
  StoreProcess p{pid, -1, life_pipe[1]};
  if (pid < 0) {
    ::close(port_pipe[0]);
    ::close(life_pipe[1]);
    return Status(StatusCode::kIoError, std::string("fork: ") + std::strerror(errno));
  }
  ssize_t n;
  while ((n = ::read(port_pipe[0], &p.port, sizeof(p.port))) < 0 && errno == EINTR) {
  }
  ::close(port_pipe[0]);
  if (n != static_cast<ssize_t>(sizeof(p.port)) || p.port <= 0) {
    ::close(p.lifeline);
    ::waitpid(pid, nullptr, 0);
    return Status(StatusCode::kInternal, "the store server process (pid " + std::to_string(pid) + ") did not start");
  }
  return p;
}

// Closes the lifeline and reaps the server; SIGKILL if it has not gone within 10 s.
void stop_store_process(const StoreProcess& store) {
  ::close(store.lifeline);
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (::waitpid(store.pid, nullptr, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= limit) {
      ::kill(store.pid, SIGKILL);
      ::waitpid(store.pid, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Reaps the ranks as they end; kills those still running at the deadline.
void wait_for_ranks(std::vector<pid_t>& pids, std::vector<RankResult>& results, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int running = 0;
  for (pid_t p : pids) running += p > 0 ? 1 : 0;
  while (running > 0) {
    // Only our own children: the caller may have other child processes.
    bool reaped = false;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] <= 0) continue;
      int wstatus = 0;
      if (::waitpid(pids[r], &wstatus, WNOHANG) != pids[r]) continue;
      if (WIFEXITED(wstatus)) results[r].exit_code = WEXITSTATUS(wstatus);
      if (WIFSIGNALED(wstatus)) results[r].signal = WTERMSIG(wstatus);
      pids[r] = -1;
      --running;
      reaped = true;
    }
    if (reaped) continue;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] <= 0) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        results[r].timed_out = true;
        pids[r] = -1;
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

std::vector<RankResult> fork_ranks(int world_size, const RankBody& body, const ForkOptions& options) {
  std::vector<RankResult> results(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) results[static_cast<size_t>(r)].rank = r;

  // A thread just joined can linger in /proc for a moment after pthread_join returns
  // (the kernel reaps it after waking the joiner): look again briefly before refusing.
  std::string threads = other_threads();
  for (int i = 0; i < 20 && !threads.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    threads = other_threads();
  }
  if (!threads.empty()) {
    mark_all(results, "not started: fork_ranks needs a single-threaded caller (a forked child may hang on a lock "
                      "another thread held; docs/design.md, \"Fork safety\"), and this process runs " +
                          threads);
    ZDP_LOG(kError) << results[0].error;
    return results;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  StatusOr<StoreProcess> store = start_store_process();
  if (!store.ok()) {
    mark_all(results, "not started: fork_ranks: " + store.status().message());
    ZDP_LOG(kError) << results[0].error;
    return results;
  }

  std::vector<pid_t> pids(static_cast<size_t>(world_size), -1);
  for (int r = 0; r < world_size; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(store->lifeline);  // only the caller keeps the server alive
      run_child(r, world_size, store->port, body, options);
    }
    pids[static_cast<size_t>(r)] = pid;
    if (pid < 0) results[static_cast<size_t>(r)].error = std::string("not started: fork: ") + std::strerror(errno);
  }
  wait_for_ranks(pids, results, options.deadline);
  stop_store_process(*store);
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

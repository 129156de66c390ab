// Running the real tools for the fault tests: a program with its output read line by
// line and time-stamped (so a test can measure "named within N s of the fault"), its
// peak memory sampled while it runs, and small job configs in a temporary directory.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/free_port.h"

extern char** environ;

namespace zdp::testing {

using FaultClock = std::chrono::steady_clock;

struct TimedLine {
  double t = 0;  // seconds since the program started
  std::string text;
};

struct JobRun {
  int exit_code = -1;  // -1 when killed by a signal or by the limit
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  long peak_rss_kib = 0;   // VmHWM, sampled while it ran
  // The most anonymous memory (RssAnon: heap, stacks; not the shared libraries' pages,
  // whose resident share depends on the page cache) seen in the samples, every 100 ms.
  long peak_anon_kib = 0;
  std::vector<TimedLine> lines;

  std::string output() const {
    std::string all;
    for (const TimedLine& l : lines) all += l.text + "\n";
    return all;
  }
  // When the first line containing `needle` appeared; -1 if none did.
  double when(const std::string& needle) const {
    for (const TimedLine& l : lines) {
      if (l.text.find(needle) != std::string::npos) return l.t;
    }
    return -1;
  }
  bool has(const std::string& needle) const { return when(needle) >= 0; }
};

struct Job {
  pid_t pid = -1;
  int out_fd = -1;
  FaultClock::time_point start;
  std::string program;  // what it execs: memory is sampled only once it runs that
};

// Starts `argv` with `env` set on top of (or, with `clean_env`, instead of) ours.
// posix_spawn: nothing of ours runs between fork and exec (docs/design.md, "Fork safety").
inline Job start_job(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                     bool clean_env = false) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  Job job;
  job.start = FaultClock::now();
  std::error_code ec;
  job.program = std::filesystem::canonical(argv.at(0), ec).string();

  std::map<std::string, std::string> vars;
  if (clean_env) {
    vars["PATH"] = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
    // The sanitizers' options and the OpenMP thread cap of scripts/sanitize.sh are how the
    // run is checked, not how the job is configured: they pass through.
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const size_t eq = entry.find('=');
      const std::string name = entry.substr(0, eq);
      const bool checker = name == "ASAN_OPTIONS" || name == "UBSAN_OPTIONS" || name == "LSAN_OPTIONS" ||
                           name == "TSAN_OPTIONS" || name == "OMP_THREAD_LIMIT";
      if (eq != std::string::npos && checker) vars[name] = entry.substr(eq + 1);
    }
  } else {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const size_t eq = entry.find('=');
      if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [k, v] : env) vars[k] = v;
  std::vector<std::string> env_text;
  for (const auto& [k, v] : vars) env_text.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  const int err = ::posix_spawn(&job.pid, raw[0], &actions, nullptr, raw.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(err, 0) << "posix_spawn " << argv.at(0) << ": " << std::strerror(err);
  if (err != 0) job.pid = -1;
  ::close(fds[1]);
  job.out_fd = fds[0];
  ::fcntl(job.out_fd, F_SETFL, O_NONBLOCK);
  return job;
}

struct MemorySample {
  long hwm_kib = 0;   // VmHWM: the peak resident set so far
  long anon_kib = 0;  // RssAnon: anonymous memory resident now
};

// `pid`'s memory once it runs `program` (between fork and exec the child's figures are
// a copy of the test process's): zeros before.
inline MemorySample memory_of(pid_t pid, const std::string& program) {
  MemorySample m;
  std::error_code ec;
  if (std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string() != program) return m;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_kib = std::stol(line.substr(6));
    if (line.rfind("RssAnon:", 0) == 0) m.anon_kib = std::stol(line.substr(8));
  }
  return m;
}

// Reads the job's output until it ends (killing it, and its process group, at `limit`).
inline JobRun finish_job(Job job, std::chrono::seconds limit) {
  JobRun run;
  if (job.pid <= 0) {  // never started (start_job said why): nothing to read, wait for or kill
    ::close(job.out_fd);
    run.exit_code = 127;
    return run;
  }
  std::string partial;
  const auto deadline = job.start + limit;
  auto seconds = [&] { return std::chrono::duration<double>(FaultClock::now() - job.start).count(); };
  for (bool open = true; open;) {
    const MemorySample m = memory_of(job.pid, job.program);
    run.peak_rss_kib = std::max(run.peak_rss_kib, m.hwm_kib);
    run.peak_anon_kib = std::max(run.peak_anon_kib, m.anon_kib);
    if (FaultClock::now() >= deadline) {
      ::kill(job.pid, SIGKILL);
      run.timed_out = true;
      break;
    }
    pollfd p{job.out_fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(job.out_fd, buf, sizeof(buf));
      if (n == 0) open = false;
      if (n <= 0) break;
      partial.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = partial.find('\n')) != std::string::npos;) {
        run.lines.push_back(TimedLine{seconds(), partial.substr(0, nl)});
        partial.erase(0, nl + 1);
      }
    }
  }
  if (!partial.empty()) run.lines.push_back(TimedLine{seconds(), partial});
  ::close(job.out_fd);
  int status = 0;
  ::waitpid(job.pid, &status, 0);
  run.seconds = seconds();
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

inline JobRun run_job(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                      std::chrono::seconds limit = std::chrono::seconds(120)) {
  return finish_job(start_job(argv, env), limit);
}

// A small dp-train job (an MLP on synthetic data, 2 CPU ranks) checkpointing every step
// into dir/ckpt, logging into dir/logs; `extra` is appended TOML.
inline std::string write_job_config(const std::string& dir, int port, int steps, const std::string& extra = "") {
  const std::string path = dir + "/job.toml";
  std::ofstream f(path);
  f << "[launch]\nnproc_per_node = 2\nbackend = \"gloo\"\nmaster_port = " << port << "\nlog_dir = \"" << dir
    << "/logs\"\ncollective_timeout_s = 60\nstartup_timeout_s = 30\n" << extra
    << "\n[model]\nkind = \"mlp\"\nn_layers = 2\nd_model = 32\nvocab_size = 10\n"
    << "[data]\nkind = \"synthetic\"\n"
    << "[train]\nglobal_batch = 16\nmicro_batch = 4\nsteps = " << steps << "\nseed = 7\nlog_every = 1\n"
    << "eval_every = 0\n"
    << "[optim]\nname = \"adamw\"\nlr = 1e-2\n"
    << "[zero]\nstage = 2\nbucket_mb = 0.01\n"
    << "[checkpoint]\ndir = \"" << dir << "/ckpt\"\nevery_steps = 1\nkeep_last = 100\nresume = \"auto\"\n";
  return path;
}

// The job's collectives (ZDP_TEST_COMM's seq): #0-#5 set it up, then each step issues 14,
// 8 of training and 6 of its checkpoint save, so collective #6 + 14 (s - 1) starts step s.
inline constexpr uint64_t kSaveCollectives = 6;
inline uint64_t first_of_step(int step) { return 6 + (8 + kSaveCollectives) * static_cast<uint64_t>(step - 1); }

// A job whose rank 0 was stopped (SIGSTOP) while rank 1 timed out waiting for it: it
// failed, and dp-launch's line names rank 0 as stopped and rank 1 only as the peer most
// likely waiting for it (the healthy rank is not blamed).
inline void expect_stopped_rank_0_named(const JobRun& run) {
  EXPECT_EQ(run.exit_code, 1);
  const std::string out = run.output();
  const size_t reason = out.find("dp-launch: rank 0 (pid");
  ASSERT_NE(reason, std::string::npos) << out;
  const std::string line = out.substr(reason, out.find('\n', reason) - reason);
  EXPECT_NE(line.find("stopped responding"), std::string::npos) << line;
  EXPECT_NE(line.find("rank 1 (node 0, pid"), std::string::npos) << line;
  EXPECT_NE(line.find("(most likely waiting for it)"), std::string::npos) << line;
}

inline std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// True when two step directories hold the same bytes in their safetensors files.
inline ::testing::AssertionResult same_checkpoint(const std::filesystem::path& a, const std::filesystem::path& b) {
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string x = file_bytes(a / name), y = file_bytes(b / name);
    if (x.empty() || x != y) {
      return ::testing::AssertionFailure() << name << " differs between " << a << " (" << x.size() << " bytes) and "
                                           << b << " (" << y.size() << " bytes)";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace zdp::testing

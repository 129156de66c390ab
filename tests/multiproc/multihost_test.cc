// A job across two real hosts: two network namespaces joined by a veth pair, each with its
// own private address (node 0 at 10.231.0.1, node 1 at 10.231.0.2), created and removed
// here, and one dp-launch per namespace (`ip netns exec`). The two-node job trains to the
// end with the weights of the same job on one host; a rank killed on node 1 stops node 0
// within the promised time; a restart resumes across both hosts; and the store refuses a
// client from the other namespace that lacks the job secret. Needs root and iproute2's
// `ip`: without them every test skips, printing why ("multihost_test: skipped: ...").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/checkpoint_tensors.h"
#include "testing/free_port.h"
#include "testing/run_command.h"

extern char** environ;

namespace zdp {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::run_command;

constexpr const char* kAddr[2] = {"10.231.0.1", "10.231.0.2"};
constexpr int kPort = 29631;  // inside the namespaces: no other job can hold it
constexpr const char* kSecret = "multihost-test-secret";
// What README "Supervision" promises: a failure anywhere stops every node's ranks within
// about a second (the job-failed key is polled every 0.25 s), plus the 5 s grace a rank
// that ignores SIGTERM gets before SIGKILL.
constexpr double kPromisedStopSeconds = 1.0 + 5.0;

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Two namespaces and the veth pair between them; all removed again by the destructor.
class TwoHosts {
 public:
  // "" when the hosts are up, else why they could not be made.
  std::string create() {
    if (::geteuid() != 0) return "network namespaces need root (ip netns add)";
    if (run_command("command -v ip").exit_code != 0) return "iproute2's `ip` is not installed";
    const std::string tag = "zdp" + std::to_string(::getpid());
    ns_ = {tag + "n0", tag + "n1"};
    veth_ = {tag + "v0", tag + "v1"};
    std::vector<std::string> steps = {"ip netns add " + ns_[0], "ip netns add " + ns_[1],
                                      "ip link add " + veth_[0] + " type veth peer name " + veth_[1]};
    for (int n : {0, 1}) {
      steps.push_back("ip link set " + veth_[n] + " netns " + ns_[n]);
      steps.push_back("ip -n " + ns_[n] + " addr add " + kAddr[n] + "/24 dev " + veth_[n]);
      steps.push_back("ip -n " + ns_[n] + " link set " + veth_[n] + " up");
      steps.push_back("ip -n " + ns_[n] + " link set lo up");
    }
    for (const std::string& step : steps) {
      const testing::CommandRun r = run_command(step);
      if (r.exit_code != 0) return "cannot create network namespaces: `" + step + "` failed: " + r.output;
    }
    return "";
  }
  ~TwoHosts() {
    for (const std::string& ns : ns_) (void)run_command("ip netns del " + ns + " 2>/dev/null");
    // A veth left in this namespace (creation failed half-way) goes with its name.
    if (!veth_.empty()) (void)run_command("ip link del " + veth_[0] + " 2>/dev/null");
  }
  const std::string& ns(int node) const { return ns_[static_cast<size_t>(node)]; }

 private:
  std::vector<std::string> ns_, veth_;
};

// One program in a namespace, its stdout and stderr in `log`.
struct Process {
  pid_t pid = -1;
  fs::path log;
  int exit_code = -1;  // -1: killed by a signal, or still running at the limit
  bool done = false;

  static Process start(const std::string& ns, const std::vector<std::string>& argv, const fs::path& log,
                       const std::map<std::string, std::string>& env) {
    Process p;
    p.log = log;
    std::vector<std::string> args = {"ip", "netns", "exec", ns};
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e, name = entry.substr(0, entry.find('='));
      if (name != "ZDP_JOB_SECRET" && env.count(name) == 0) vars.push_back(entry);
    }
    for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
    std::vector<char*> argp, envp;
    for (std::string& a : args) argp.push_back(a.data());
    for (std::string& v : vars) envp.push_back(v.data());
    argp.push_back(nullptr);
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawnp(&p.pid, "ip", &actions, nullptr, argp.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "posix_spawnp ip netns exec: " << rc;
    if (rc != 0) p.done = true;
    return p;
  }
  // Waits up to `limit` for the exit; kills the process at the limit. True when it exited.
  bool wait(std::chrono::duration<double> limit) {
    const auto deadline = Clock::now() + limit;
    while (!done) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        done = true;
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return true;
      }
      if (Clock::now() >= deadline) {
        ::kill(pid, SIGKILL);
        (void)::waitpid(pid, &status, 0);
        done = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // Waits until the output contains `text`; false at the limit or when the process ended.
  bool wait_for_output(const std::string& text, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (output().find(text) != std::string::npos) return true;
      int status = 0;
      if (!done && ::waitpid(pid, &status, WNOHANG) == pid) {
        done = true;
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (done) return output().find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::string output() const { return read_file(log); }
  ~Process() {
    if (!done && pid > 0) wait(std::chrono::seconds(0));
  }
};

// The pids whose parent is `parent` (a launcher's ranks).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // "pid (comm) state ppid ...": comm may hold spaces, so read on after its last ") ".
    const std::string line = read_file(entry.path() / "stat");
    std::string state;
    pid_t ppid = 0;
    const size_t close = line.rfind(") ");
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

class MultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hosts_ = new TwoHosts;
    skip_reason_ = new std::string(hosts_->create());
    char tmpl[] = "/tmp/zdp_multihost_XXXXXX";
    dir_ = new fs::path(::mkdtemp(tmpl));
    if (!skip_reason_->empty()) return;
    // The reference: the same job of 2 ranks on one host (this namespace, loopback).
    reference_ = new testing::CommandRun(run_command(
        std::string(ZDP_DP_LAUNCH) + " " + write_config("reference", 20, 0, 5) + " --set launch.nnodes=1" +
        " --set launch.nproc_per_node=2 --set launch.master_addr=127.0.0.1 --set launch.master_port=" +
        std::to_string(testing::free_port())));
  }
  static void TearDownTestSuite() {
    delete hosts_;
    fs::remove_all(*dir_);
    delete dir_;
    delete skip_reason_;
    delete reference_;
  }
  void SetUp() override {
    if (!skip_reason_->empty()) {
      std::printf("multihost_test: skipped: %s\n", skip_reason_->c_str());
      GTEST_SKIP() << *skip_reason_;
    }
    ASSERT_EQ(reference_->exit_code, 0) << reference_->output;
  }

  // The job: 1 rank per node of 2, the test mlp, checkpoints every `every` steps (0: after
  // the last) in <dir>/<name>.
  static std::string write_config(const std::string& name, int steps, int max_restarts, int every) {
    const fs::path path = *dir_ / (name + ".toml");
    std::ofstream(path) << "[launch]\nnproc_per_node = 1\nnnodes = 2\nmaster_addr = \"" << kAddr[0]
                        << "\"\nmaster_port = " << kPort << "\nbackend = \"gloo\"\nprogram = \"" << ZDP_DP_TRAIN
                        << "\"\nlog_dir = \"" << (*dir_ / (name + "-logs")).string() << "\"\nmax_restarts = "
                        << max_restarts << "\nstartup_timeout_s = 30\ncollective_timeout_s = 30\n"
                        // One thread per rank on both layouts: the same GEMMs, the same bits.
                        << "env = { OMP_NUM_THREADS = \"1\", OPENBLAS_NUM_THREADS = \"1\" }\n"
                        << "[model]\nkind = \"mlp\"\nn_layers = 2\nd_model = 32\nvocab_size = 10\n"
                        << "[train]\nglobal_batch = 16\nmicro_batch = 2\nsteps = " << steps
                        << "\nlog_every = 1\ndeterministic = true\n[optim]\nlr = 1e-2\n"
                        << "[zero]\nstage = 2\nbucket_mb = 0.01\n[checkpoint]\ndir = \""
                        << (*dir_ / name).string() << "\"\nevery_steps = " << every << "\n";
    return path.string();
  }
  // dp-launch of `config` as node `node`, in its namespace, with the job secret.
  Process launch(int node, const std::string& config, std::map<std::string, std::string> env = {}) {
    env["ZDP_JOB_SECRET"] = kSecret;
    return Process::start(hosts_->ns(node),
                          {ZDP_DP_LAUNCH, config, "--node-rank", std::to_string(node)},
                          *dir_ / ("node" + std::to_string(node) + "-" + std::to_string(++launches_) + ".out"), env);
  }
  static testing::Tensors final_model(const std::string& name, int step) {
    return testing::read_tensors((*dir_ / name / ("step-" + std::to_string(step)) / "model.safetensors").string());
  }

  static TwoHosts* hosts_;
  static std::string* skip_reason_;
  static fs::path* dir_;
  static testing::CommandRun* reference_;
  int launches_ = 0;
};

TwoHosts* MultiHost::hosts_ = nullptr;
std::string* MultiHost::skip_reason_ = nullptr;
fs::path* MultiHost::dir_ = nullptr;
testing::CommandRun* MultiHost::reference_ = nullptr;

// Each rank advertises the address of its own host (the local address routing to node 0),
// the job trains to the end, and its weights are the one-host job's, bit for bit. Before
// node 1 starts, a client in node 1's namespace without the job secret is refused by
// node 0's store, which logs it.
TEST_F(MultiHost, TwoHostsTrainToTheEndLikeOneHostAndTheStoreRefusesAClientWithoutTheSecret) {
  const std::string config = write_config("two-hosts", 20, 0, 5);
  Process node0 = launch(0, config);
  ASSERT_TRUE(node0.wait_for_output("node 0/2: starting", std::chrono::seconds(30))) << node0.output();

  Process intruder = Process::start(
      hosts_->ns(1), {ZDP_DP_TRAIN}, *dir_ / "intruder.out",
      // ZDP_LAUNCHER: it poses as a rank dp-launch started, so it dials node 0's store.
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", kAddr[0]}, {"MASTER_PORT", std::to_string(kPort)},
       {"ZDP_LAUNCHER", "dp-launch"}});
  ASSERT_TRUE(intruder.wait(std::chrono::seconds(30))) << intruder.output();
  EXPECT_NE(intruder.exit_code, 0) << intruder.output();
  EXPECT_NE(intruder.output().find("the server closed the connection (a store that requires a job secret does this"),
            std::string::npos)
      << intruder.output();
  EXPECT_TRUE(node0.wait_for_output(std::string("refused ") + kAddr[1], std::chrono::seconds(10))) << node0.output();

  Process node1 = launch(1, config);
  ASSERT_TRUE(node1.wait(std::chrono::seconds(120))) << node1.output();
  ASSERT_TRUE(node0.wait(std::chrono::seconds(30))) << node0.output();
  ASSERT_EQ(node1.exit_code, 0) << node1.output() << "\n--- node 0:\n" << node0.output();
  ASSERT_EQ(node0.exit_code, 0) << node0.output();
  for (int n : {0, 1}) {
    const std::string line = "node " + std::to_string(n) + ": ranks advertise " + kAddr[n] +
                             " (the local address routing to master_addr " + kAddr[0] + ")";
    EXPECT_NE((n == 0 ? node0 : node1).output().find(line), std::string::npos) << line;
  }
  EXPECT_TRUE(testing::bitwise_equal(final_model("two-hosts", 20), final_model("reference", 20)))
      << "largest difference " << testing::max_difference(final_model("two-hosts", 20), final_model("reference", 20));
}

// SIGKILL to the rank on node 1 mid-run: node 1's launcher names it, and node 0's launcher
// (watching the job-failed key, or seeing its own rank lose its peer) exits within the
// promised time.
TEST_F(MultiHost, ARankKilledOnNodeOneStopsNodeZeroWithinThePromisedTime) {
  const std::string config = write_config("killed", 1000000, 0, 0);
  Process node0 = launch(0, config, {});
  Process node1 = launch(1, config, {});
  ASSERT_TRUE(node0.wait_for_output("[rank 0] step 5/", std::chrono::seconds(60))) << node0.output() << node1.output();
  const std::vector<pid_t> ranks = children_of(node1.pid);
  ASSERT_EQ(ranks.size(), 1u) << "node 1's dp-launch should have one rank";
  const auto killed = Clock::now();
  ASSERT_EQ(::kill(ranks[0], SIGKILL), 0);
  ASSERT_TRUE(node0.wait(std::chrono::seconds(30))) << node0.output();
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  ASSERT_TRUE(node1.wait(std::chrono::seconds(30))) << node1.output();
  std::printf("multihost_test: a rank SIGKILLed on node 1 stopped node 0's dp-launch %.3f s later (promised: %.1f s)\n",
              seconds, kPromisedStopSeconds);
  EXPECT_LT(seconds, kPromisedStopSeconds) << node0.output();
  EXPECT_EQ(node0.exit_code, 1) << node0.output();
  EXPECT_EQ(node1.exit_code, 1) << node1.output();
  EXPECT_NE(node1.output().find("rank 1 (node 1, pid " + std::to_string(ranks[0]) + ") failed: killed by signal 9"),
            std::string::npos)
      << node1.output();
}

// dp-train's fault hook kills the rank on node 1 after step 13 in the first attempt: both
// launchers restart the job, the ranks resume from step-10 on both hosts, and the job ends
// with the weights of the uninterrupted one-host job.
TEST_F(MultiHost, ARestartResumesAcrossBothHosts) {
  const std::string config = write_config("restarted", 20, 1, 5);
  Process node0 = launch(0, config);
  Process node1 = launch(1, config, {{"ZDP_TRAIN_FAULT", "rank=1,step=13,attempt=0"}});
  ASSERT_TRUE(node1.wait(std::chrono::seconds(180))) << node1.output();
  ASSERT_TRUE(node0.wait(std::chrono::seconds(30))) << node0.output();
  ASSERT_EQ(node1.exit_code, 0) << node1.output() << "\n--- node 0:\n" << node0.output();
  ASSERT_EQ(node0.exit_code, 0) << node0.output();
  EXPECT_NE(node1.output().find("killing this rank after step 13"), std::string::npos) << node1.output();
  for (const Process* node : {&node0, &node1}) {
    EXPECT_NE(node->output().find("restarting the job as attempt 1 (restart 1 of 1)"), std::string::npos) << node->output();
  }
  const std::string resumed = "checkpoint: resumed from " + (*dir_ / "restarted" / "step-10").string();
  EXPECT_NE(node0.output().find(resumed), std::string::npos) << node0.output();
  EXPECT_TRUE(testing::bitwise_equal(final_model("restarted", 20), final_model("reference", 20)))
      << "largest difference " << testing::max_difference(final_model("restarted", 20), final_model("reference", 20));
}

}  // namespace
}  // namespace zdp

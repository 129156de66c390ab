// Checkpoint save and load time next to `dd` moving the same bytes, in one run.
//
//   checkpoint_bench [--params 100M] [--ranks 2] [--stage 2] [--reps 3] [--dir /tmp]
//                    [--drop-caches] [--keep]
//
// K CPU rank processes (Gloo) register a model of --params fp32 parameters (square
// [2048, 2048] matrices, each with a [2048] bias: odd sizes straddle buckets and slices),
// then each repetition times, on rank 0, from call to return:
//   save         Engine::save_checkpoint: create, parallel pwrite, fsync, read-back
//                checksums, state.json, rename, latest (keep = 1)
//   load         Engine::load_checkpoint, every chunk verified
//   load-nover   the same with ChecksumPolicy::kSkip
// and, in the same repetition (so both see the same disk load), rank 0 times `dd` writing
// the same number of bytes with fsync into a file preallocated with fallocate, as the save
// does (the floor for a durable write of that much data; the ratios are against it), dd
// into a new file (on ext4 delayed allocation makes that slower), and dd reading the
// checkpoint files back. With --drop-caches (root) the page cache
// is dropped before each load and dd read, so they read from the disk; otherwise they
// mostly read from memory. The first repetition is a warm-up (its save creates the files,
// and dd has no size for it yet): the table prints the medians over the others, every
// operation's over the same repetitions, and the ratio to dd.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/engine_runs.h"
#include "testing/fork_ranks.h"
#include "zdp/checkpoint.h"
#include "zdp/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int64_t params = 100'000'000;
  int ranks = 2;
  int stage = 2;
  int reps = 3;
  std::string dir = "/tmp";
  bool drop_caches = false;
  bool keep = false;
};

bool parse_count(const std::string& text, int64_t& out) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return false;
  const std::string unit(end);
  if (unit == "K" || unit == "k")
    v *= 1e3;
  else if (unit == "M")
    v *= 1e6;
  else if (unit == "G")
    v *= 1e9;
  else if (!unit.empty())
    return false;
  out = static_cast<int64_t>(v);
  return out > 0;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](std::string& v) { return i + 1 < argc ? (v = argv[++i], true) : false; };
    std::string v;
    if (a == "--params" && next(v)) {
      if (!parse_count(v, o.params)) return false;
    } else if (a == "--ranks" && next(v)) {
      o.ranks = std::atoi(v.c_str());
    } else if (a == "--stage" && next(v)) {
      o.stage = std::atoi(v.c_str());
    } else if (a == "--reps" && next(v)) {
      o.reps = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--dir" && next(v)) {
      o.dir = v;
    } else if (a == "--drop-caches") {
      o.drop_caches = true;
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      return false;
    }
  }
  return o.ranks >= 1 && o.stage >= 0 && o.stage <= 3;
}

void drop_caches() {
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "1\n";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Seconds `command` takes (std::system), or -1 when it fails.
double time_command(const std::string& command) {
  const Clock::time_point t = Clock::now();
  return std::system(command.c_str()) == 0 ? seconds_since(t) : -1.0;
}

// One rank: the model, then reps x (save, load, load without checksums); rank 0 writes
// its times to `times`.
zdp::Status bench_rank(const Options& o, const std::string& root, const std::string& times, int rank, int world,
                       zdp::Store& store) {
  ZDP_ASSIGN_OR_RETURN(zdp::Context ctx, zdp::testing::make_test_context(rank, world, store));
  zdp::EngineOptions eo;
  eo.zero.stage = o.stage;
  zdp::Engine engine(ctx, eo);
  constexpr int64_t d = 2048;
  const int layers = static_cast<int>(std::max<int64_t>(1, o.params / (d * d + d)));
  for (int l = 0; l < layers; ++l) {
    const std::string name = "layers." + std::to_string(l);
    ZDP_RETURN_IF_ERROR(engine.add_param(name + ".weight", {d, d}, zdp::Init::uniform(-0.02f, 0.02f), l).status());
    ZDP_RETURN_IF_ERROR(engine.add_param(name + ".bias", {d}, zdp::Init::uniform(-0.02f, 0.02f), l).status());
  }
  ZDP_RETURN_IF_ERROR(engine.finalize());
  std::vector<double> save, load, load_skip, dd_write, dd_prealloc, dd_read;
  const std::string dd_file = root + ".dd";
  for (int rep = 0; rep < o.reps; ++rep) {
    if (rank == 0 && rep > 0) {  // the bytes of the checkpoint (rep 0: not known yet)
      const zdp::CheckpointInfo info = zdp::read_checkpoint_info(root).value();
      int64_t bytes = 0;
      for (const zdp::CheckpointFileInfo& f : info.files) bytes += f.bytes;
      const int64_t block = int64_t{4} << 20;
      const std::string count = std::to_string((bytes + block - 1) / block);
      dd_write.push_back(
          time_command("dd if=/dev/zero of=" + dd_file + " bs=4M count=" + count + " conv=fsync status=none"));
      std::filesystem::remove(dd_file);
      // Like the save, into a preallocated file (on ext4 much faster than a fresh one).
      dd_prealloc.push_back(time_command("fallocate -l " + std::to_string(bytes) + " " + dd_file +
                                         " && dd if=/dev/zero of=" + dd_file + " bs=4M count=" + count +
                                         " conv=notrunc,fsync status=none"));
      std::filesystem::remove(dd_file);
      if (o.drop_caches) drop_caches();
      dd_read.push_back(time_command("cat " + info.state.path + "/*.safetensors | dd of=/dev/null bs=4M status=none"));
    }
    zdp::CheckpointState state;
    state.step = rep + 1;
    zdp::SaveOptions so;
    so.keep = 1;
    Clock::time_point t = Clock::now();
    ZDP_RETURN_IF_ERROR(engine.save_checkpoint(root, state, so).status());
    save.push_back(seconds_since(t));
    for (zdp::ChecksumPolicy policy : {zdp::ChecksumPolicy::kVerify, zdp::ChecksumPolicy::kSkip}) {
      if (o.drop_caches && rank == 0) drop_caches();
      zdp::LoadOptions lo;
      lo.checksums = policy;
      t = Clock::now();
      ZDP_RETURN_IF_ERROR(engine.load_checkpoint(root, lo).status());
      (policy == zdp::ChecksumPolicy::kVerify ? load : load_skip).push_back(seconds_since(t));
    }
  }
  if (rank == 0) {
    std::ofstream out(times);
    out << layers << "\n";
    for (int rep = 0; rep < o.reps; ++rep) {
      out << save[rep] << " " << load[rep] << " " << load_skip[rep] << " " << (rep ? dd_write[rep - 1] : -1) << " "
          << (rep ? dd_prealloc[rep - 1] : -1) << " " << (rep ? dd_read[rep - 1] : -1) << "\n";

    }
  }
  return zdp::Status::Ok();
}

// The middle value, or the mean of the two middle ones (with two samples the upper one
// was taken: the slower dd, which flattered the ratios against it).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: checkpoint_bench [--params 100M] [--ranks 2] [--stage 2] [--reps 3] [--dir /tmp] "
                 "[--drop-caches] [--keep]\n");
    return 2;
  }
  if (o.reps < 2) {
    std::fprintf(stderr, "checkpoint_bench: --reps must be >= 2 (dd runs from the second one on)\n");
    return 2;
  }
  std::string base = o.dir + "/zdp_checkpoint_bench_XXXXXX";
  if (::mkdtemp(base.data()) == nullptr) {
    std::perror(("checkpoint_bench: mkdtemp in " + o.dir).c_str());
    return 1;
  }
  const std::string root = base + "/ckpt", times = base + "/times.txt";
  zdp::testing::ForkOptions fopts;
  fopts.deadline = std::chrono::minutes(30);
  const std::string failed = zdp::testing::describe_failures(zdp::testing::fork_ranks(
      o.ranks, [&](int rank, int world, zdp::Store& store) { return bench_rank(o, root, times, rank, world, store); },
      fopts));
  if (!failed.empty()) {
    std::fprintf(stderr, "checkpoint_bench: ranks failed:\n%s", failed.c_str());
    return 1;
  }
  std::ifstream in(times);
  int layers = 0;
  in >> layers;
  std::vector<double> save, load, load_skip, dd_write, dd_prealloc, dd_read;
  for (int rep = 0; rep < o.reps; ++rep) {
    double v[6];
    for (double& x : v) in >> x;
    if (rep > 0) {  // rep 0 is the warm-up: every series over the same repetitions
      save.push_back(v[0]);
      load.push_back(v[1]);
      load_skip.push_back(v[2]);
      dd_write.push_back(v[3]);
      dd_prealloc.push_back(v[4]);
      dd_read.push_back(v[5]);
    }
  }
  const zdp::CheckpointInfo info = zdp::read_checkpoint_info(root).value();
  int64_t bytes = 0;
  for (const zdp::CheckpointFileInfo& f : info.files) bytes += f.bytes;
  const double w = median(dd_prealloc), r = median(dd_read);
  std::printf("checkpoint of %lld parameters (%d x [2048, 2048] + [2048]), %d ranks, stage %d, %s on %s%s\n",
              static_cast<long long>(info.elements), layers, o.ranks, o.stage, zdp::format_bytes(bytes).c_str(),
              o.dir.c_str(), o.drop_caches ? ", page cache dropped before reads" : "");
  std::printf("%-34s %10s %10s %12s\n", "operation (median of reps)", "seconds", "GB/s", "vs dd");
  auto row = [&](const char* what, double s, double ref) {
    std::printf("%-34s %10.3f %10.2f %12.2f\n", what, s, static_cast<double>(bytes) / s / 1e9, s / ref);
  };
  row("save_checkpoint", median(save), w);
  row("dd into a preallocated file, fsync", w, w);
  row("dd into a new file, fsync", median(dd_write), w);
  row("load_checkpoint (verified)", median(load), r);
  row("load_checkpoint (checksums off)", median(load_skip), r);
  row("dd read of the same files", r, r);
  // Every repetition, so the spread (a shared disk is noisy) is visible.
  auto list = [](const char* what, const std::vector<double>& v) {
    std::printf("  %-12s", what);
    for (double x : v) std::printf(" %7.3f", x);
    std::printf("\n");
  };
  std::printf("each repetition after the warm-up, seconds:\n");
  list("save", save);
  list("dd prealloc", dd_prealloc);
  list("dd new file", dd_write);
  list("load", load);
  list("load nover", load_skip);
  list("dd read", dd_read);
  if (!o.keep)
    std::filesystem::remove_all(base);
  else
    std::printf("kept %s\n", base.c_str());
  return 0;
}

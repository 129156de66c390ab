// README.md "Use zdp from your own trainer": the example compiles and trains here (a world
// of 1, default config), and the README shows exactly this code (the block between the
// markers, its own includes in it: std::sin and std::printf's headers were above the
// marker, and the README's copy did not compile alone), so the two cannot drift apart.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

// README-BEGIN
#include <cmath>
#include <cstdio>

#include "zdp/context.h"
#include "zdp/engine.h"

// Fits y = W x + b to the target y = x / 2 with zdp; returns the last loss. Every rank
// runs this (under dp-launch, torchrun or Slurm); alone it is a world of 1.
float train(int steps) {
  zdp::Context ctx = zdp::init().value();  // errors throw zdp::Error naming rank and cause
  zdp::Engine engine(ctx, zdp::EngineOptions::from(ctx.config(), ctx.world_size()).value());
  constexpr int d = 16;
  const zdp::Param w = engine.add_param("fc.weight", {d, d}, zdp::Init::normal(0.02f), /*layer=*/0).value();
  const zdp::Param b = engine.add_param("fc.bias", {d}, zdp::Init::zeros(), /*layer=*/0).value();
  engine.finalize().throw_if_error();  // layout, buffers, broadcast from rank 0, hash check
  float loss = 0;
  for (int step = 0; step < steps; ++step) {
    for (int64_t micro = 0; micro < engine.accum_steps(); ++micro) {
      float x[d];  // this rank's sample of the global batch
      for (int i = 0; i < d; ++i) x[i] = std::sin(0.7f * (step * 131 + micro * 17 + ctx.rank() * 7 + i));
      zdp::Engine::LayerScope scope = engine.layer(0).value();  // stage 3: gathered here
      const float* W = engine.param_as<float>(w);                // compute dtype ([model] dtype)
      const float* B = engine.param_as<float>(b);
      float* gW = engine.grad_as<float>(w);  // overwrite: the engine accumulates micro-batches
      float* gB = engine.grad_as<float>(b);
      loss = 0;
      for (int i = 0; i < d; ++i) {
        float y = B[i];
        for (int j = 0; j < d; ++j) y += W[i * d + j] * x[j];
        const float e = y - 0.5f * x[i];
        loss += 0.5f * e * e;
        gB[i] = e;
        for (int j = 0; j < d; ++j) gW[i * d + j] = e * x[j];
      }
      engine.grad_ready(w).throw_if_error();  // last micro-batch: buckets start reducing
      engine.grad_ready(b).throw_if_error();
    }
    const zdp::StepStats stats = engine.step().value();  // reduce, clip, AdamW, all-gather
    if (ctx.rank() == 0 && step % 50 == 0) std::printf("step %d loss %.4f grad norm %.4f\n", step, loss, stats.grad_norm);
  }
  return loss;
}
// README-END

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ReadmeExample, Trains) {
  // The job config, as dp-launch hands it to its ranks: the defaults with a larger lr.
  char path[] = "/tmp/zdp_readme_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string config = "[optim]\nlr = 0.01\n";
  ASSERT_EQ(::write(fd, config.data(), config.size()), static_cast<ssize_t>(config.size()));
  ::close(fd);
  ::setenv("ZDP_CONFIG", path, 1);
  ::setenv("ZDP_BACKEND", "gloo", 1);  // CPU ranks, as in the example, even beside a GPU
  const float first = train(1), last = train(200);
  ::unsetenv("ZDP_BACKEND");
  ::unsetenv("ZDP_CONFIG");
  ::unlink(path);
  EXPECT_LT(last, 0.1f * first) << "first " << first << ", last " << last;
}

TEST(ReadmeExample, IsTheCodeTheReadmeShows) {
  const std::string self_path = std::string(ZDP_SOURCE_DIR) + "/tests/unit/readme_example_test.cc";
  const std::string self = read(self_path);
  const std::string begin = "// README-BEGIN\n", end = "// README-END\n";
  ASSERT_NE(self.find(begin), std::string::npos) << "no README-BEGIN marker in " << self_path;
  const size_t from = self.find(begin) + begin.size(), to = self.find(end);
  ASSERT_LT(from, to);
  const std::string code = self.substr(from, to - from);
  const std::string readme = read(std::string(ZDP_SOURCE_DIR) + "/README.md");
  ASSERT_FALSE(readme.empty()) << "README.md not found in " << ZDP_SOURCE_DIR;
  EXPECT_NE(readme.find("```cpp\n" + code + "```\n"), std::string::npos)
      << "README.md's example differs from tests/unit/readme_example_test.cc; paste:\n" << code;
}

}  // namespace

// make_profiler() and the ZDP_PROFILE_TEST_DELAY test hook (profiling.h).
#include "trainer/loop/profiling.h"

#include <cstdlib>
#include <regex>
#include <string>

namespace zdp::trainer {

std::unique_ptr<Profiler> make_profiler(Context& ctx, Engine& engine, const Config& config, const Model& model,
                                        double peak_flops, int64_t first_step, std::FILE* out) {
  ProfileOptions o = ProfileOptions::from(config);
  o.samples_per_step = config.train.global_batch;
  o.tokens_per_sample = model.tokens_per_sample();
  o.flops_per_sample = model.flops_per_sample();
  if (o.peak_flops <= 0) o.peak_flops = peak_flops;
  o.description = model.describe() + ", " + to_string(config.model.dtype);
  o.out = out;
  o.first_step = first_step;
  return std::make_unique<Profiler>(ctx, engine, std::move(o));
}

StatusOr<std::chrono::milliseconds> profile_test_delay(int rank) {
  const char* value = std::getenv("ZDP_PROFILE_TEST_DELAY");
  if (value == nullptr || *value == '\0') return std::chrono::milliseconds(0);
  std::smatch m;
  const std::string text = value;
  if (!std::regex_match(text, m, std::regex(R"(rank=(\d+),ms=(\d+))"))) {
    return Status(StatusCode::kInvalidArgument, "ZDP_PROFILE_TEST_DELAY='" + text +
                                                    "' is not rank=R,ms=M (a test hook: unset it outside tests)");
  }
  if (std::stoi(m[1].str()) != rank) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(std::stoll(m[2].str()));
}

}  // namespace zdp::trainer

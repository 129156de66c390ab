// Random test inputs, fresh for every test: the seed comes from ZDP_TEST_SEED when set
// (to reproduce a failure) or else from std::random_device, and every test prints it
// through SCOPED_TRACE. Values are drawn away from zero: a kernel that ignores an input
// or a state must not pass because that input happened to be 0.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/common.h"

namespace zdp::testing {

inline uint64_t test_seed() {
  if (const char* s = std::getenv("ZDP_TEST_SEED")) return std::strtoull(s, nullptr, 0);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

class TestRandom {
 public:
  TestRandom() : seed_(test_seed()), rng_(seed_) {}
  uint64_t seed() const { return seed_; }
  std::string trace() const { return "ZDP_TEST_SEED=" + std::to_string(seed_); }

  // |x| uniform in [lo, hi) with a random sign; lo > 0 keeps it away from zero.
  float signed_uniform(float lo, float hi) {
    std::uniform_real_distribution<float> mag(lo, hi);
    return (rng_() & 1u) ? mag(rng_) : -mag(rng_);
  }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  uint64_t bits64() { return (static_cast<uint64_t>(rng_()) << 32) | rng_(); }

  std::vector<float> signed_vector(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& x : v) x = signed_uniform(lo, hi);
    return v;
  }
  std::vector<float> positive_vector(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
  std::mt19937& engine() { return rng_; }

 private:
  uint64_t seed_;
  std::mt19937 rng_;
};

// Encodes fp32 values into storage type T (round to nearest) and decodes them back, so a
// test can hold a 16-bit gradient and the exact values a float64 reference must see.
template <typename T>
std::vector<T> encode(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = kernels::from_f32<T>(v[i]);
  return out;
}
template <typename T>
std::vector<double> decode(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = kernels::to_f32(v[i]);
  return out;
}

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, kernels::Bf16>) return DType::kBF16;
  else if constexpr (std::is_same_v<T, kernels::Half>) return DType::kF16;
  else return DType::kF32;
}

}  // namespace zdp::testing

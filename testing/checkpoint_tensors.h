// The fp32 tensors of a checkpoint's model.safetensors by name, and their comparisons: how
// tests check that two jobs (resumed or not, one host or several) ended at the same weights.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "zdp/safetensors.h"

namespace zdp::testing {

using Tensors = std::map<std::string, std::vector<float>>;

// Every F32 tensor of a safetensors file (a failure to read it fails the test).
inline Tensors read_tensors(const std::string& path) {
  Tensors out;
  StatusOr<safetensors::Reader> r = safetensors::Reader::open(path);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return out;
  for (const safetensors::TensorInfo& t : r->header().tensors) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    EXPECT_TRUE(r->read(t.begin, v.data(), t.bytes()).ok()) << t.name;
    out[t.name] = std::move(v);
  }
  return out;
}

// The largest |a - b| over every element (names and sizes must match).
inline double max_difference(const Tensors& a, const Tensors& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size()) {
      ADD_FAILURE() << "tensor " << name << " missing or resized";
      return INFINITY;
    }
    for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::fabs(double(va[i]) - double(it->second[i])));
  }
  return worst;
}

// Same names, sizes and bits; false for two empty sets (an unread file is no match).
inline bool bitwise_equal(const Tensors& a, const Tensors& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size() ||
        std::memcmp(va.data(), it->second.data(), va.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace zdp::testing

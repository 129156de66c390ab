// What the launch plan's tests (launch_plan_test, launch_config_test) start from: a config
// parsed from text (named test.toml in its messages) and the inputs of a node with 8 cores
// and no GPU.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/launch_plan.h"
#include "zdp/config.h"

namespace zdp::launch_plan_testing {

inline Config parsed(const std::string& text, const std::vector<std::string>& sets = {}) {
  StatusOr<Config> c = parse_config(text, "test.toml", sets);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : Config{};
}

inline launcher::PlanInputs inputs() {
  launcher::PlanInputs in;
  in.cpu_cores = 8;
  in.config_file = "/tmp/x/config.toml";
  return in;
}

}  // namespace zdp::launch_plan_testing

// An environment made up for a test: the EnvLookup (zdp/launch_env.h) that answers from
// `vars` and nothing else, so a test of the launch environment, the launch plan or the
// rank address never reads (or depends on) the real one.
#pragma once

#include <map>
#include <string>

#include "zdp/launch_env.h"

namespace zdp::testing {

inline EnvLookup fake_env(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace zdp::testing

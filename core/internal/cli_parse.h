// How zdp's commands (dp-train, dp-data, dp-ckpt, dp-check; dp-launch does the same with
// its own subcommand hints) read their command line with CLI11: a usage error exits 2, as
// dp-launch's own and most Unix tools' do (CLI11_PARSE's 105-109 meant nothing to a
// caller), --help and --version exit 0; and a path flag may not be empty ("" was taken and
// failed later, e.g. at the rename of dp-data's output to '').
// Header-only: only the commands include it, and they link CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

// In a main(): parses or returns the exit code (CLI11 prints the message or the help).
#define ZDP_CLI_PARSE(app, argc, argv)                 \
  do {                                                 \
    try {                                              \
      (app).parse((argc), (argv));                     \
    } catch (const CLI::ParseError& parse_error) {     \
      return (app).exit(parse_error) == 0 ? 0 : 2;     \
    }                                                  \
  } while (false)

namespace zdp {

inline CLI::Validator non_empty() {
  return CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty value") : std::string(); },
                        "NON-EMPTY");
}

}  // namespace zdp

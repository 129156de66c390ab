// Token files are memory-mapped (token_file.h): a file truncated in place while a run reads
// it (a preparation script that opens it with "wb" again, say) makes the next read of a
// page past its new end raise SIGBUS, and the rank died as "killed by signal 7" without a
// word about which file. These register each mapping, and a SIGBUS handler that dp-train
// installs names the file before the rank dies of the same signal.
#pragma once

#include <cstddef>
#include <string>

#include "trainer/data/token_shards.h"

namespace zdp::trainer {

// Records [begin, begin + bytes) as the mapping of `path`; forget_mapping(begin) removes
// it. Thread-safe. At most kMaxMappedFiles at once (more are not named, still mapped):
// the training and held-out sets' shards (kMaxTokenShards each).
inline constexpr size_t kMaxMappedFiles = 2 * kMaxTokenShards;
void remember_mapping(const void* begin, size_t bytes, const std::string& path);
void forget_mapping(const void* begin);

// Installs the SIGBUS handler (once). A fault inside a recorded mapping writes "<who>:
// token file '<path>' became shorter while it was read ..." to stderr (`who` names the
// process, and the rank where one is known: the messages of later mappings carry it); any
// SIGBUS then goes on with the default action (the process dies of it).
void report_mapped_file_faults(const std::string& who = "dp-train");

}  // namespace zdp::trainer

// The emulated NCCL's exchange (nccl_exchange.h).
#include "testing/simt/nccl_exchange.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>

#include "kernels/convert.h"
#include "testing/simt/emulated_gpu_device.h"

namespace zdp_emu {
namespace {

// Whether process `pid` has exited (gone, or a zombie its parent has not reaped yet).
bool process_gone(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!stat || !std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' || text[paren + 2] == 'X';
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool read_file(const std::string& path, std::vector<char>* out, std::string* why) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    *why = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  out->clear();
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out->insert(out->end(), buf, buf + n);
  const bool ok = std::ferror(f) == 0;
  std::fclose(f);
  if (!ok) *why = "cannot read " + path;
  return ok;
}

// Element i of a buffer of `type` as float (fp32, fp16, bf16), and back, rounded to the type.
float load(ncclDataType_t type, const char* p, size_t i) {
  uint16_t h = 0;
  switch (type) {
    case ncclFloat32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case ncclFloat16: std::memcpy(&h, p + 2 * i, 2); return zdp::kernels::f16_to_f32(h);
    default: std::memcpy(&h, p + 2 * i, 2); return zdp::kernels::bf16_to_f32(h);
  }
}
void store(ncclDataType_t type, char* p, size_t i, float v) {
  uint16_t h = 0;
  switch (type) {
    case ncclFloat32: std::memcpy(p + 4 * i, &v, 4); return;
    case ncclFloat16: h = zdp::kernels::f32_to_f16(v); break;
    default: h = zdp::kernels::f32_to_bf16(v); break;
  }
  std::memcpy(p + 2 * i, &h, 2);
}

float rounded(ncclDataType_t type, float v) {
  char tmp[4];
  store(type, tmp, 0, v);
  return load(type, tmp, 0);
}

// acc[i] = acc[i] (op) x[i] for n elements, each result rounded to the type (NCCL's ring
// stores every partial result in the type); avg's inputs are first multiplied by 1/nranks
// and rounded (NCCL's pre-multiplied sum). `first`: x is the first input, acc is set to it.
template <typename Int>
void accumulate_integers(ncclRedOp_t op, bool first, char* acc, const char* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    Int a = 0, b = 0;
    std::memcpy(&b, x + sizeof(Int) * i, sizeof(Int));
    if (!first) std::memcpy(&a, acc + sizeof(Int) * i, sizeof(Int));
    const Int r = first ? b : (op == ncclMax ? std::max(a, b) : static_cast<Int>(a + b));
    std::memcpy(acc + sizeof(Int) * i, &r, sizeof(Int));
  }
}

void accumulate(ncclDataType_t type, ncclRedOp_t op, int nranks, bool first, char* acc, const char* x, size_t n) {
  if (type == ncclInt64) return accumulate_integers<int64_t>(op, first, acc, x, n);
  if (type == ncclInt32) return accumulate_integers<int32_t>(op, first, acc, x, n);
  const float scale = 1.0f / static_cast<float>(nranks);
  for (size_t i = 0; i < n; ++i) {
    float b = load(type, x, i);
    if (op == ncclAvg) b = rounded(type, b * scale);
    if (first) {
      store(type, acc, i, b);
      continue;
    }
    const float a = load(type, acc, i);
    store(type, acc, i, op == ncclMax ? std::max(a, b) : a + b);
  }
}

}  // namespace

size_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32:
    case ncclInt32: return 4;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt64: return 8;
    default: return 0;
  }
}

bool write_file(const std::string& path, const void* data, size_t bytes, std::string* why) {
  const std::string part = path + ".part";
  std::FILE* f = std::fopen(part.c_str(), "wb");
  if (f == nullptr) {
    *why = "cannot create " + part + ": " + std::strerror(errno);
    return false;
  }
  const bool wrote = bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes;
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed || std::rename(part.c_str(), path.c_str()) != 0) {
    *why = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

ncclResult_t check_ready(CommState& state) {
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (state.async_error != ncclSuccess) return state.async_error;
  }
  if (state.ready) return ncclSuccess;
  std::vector<long> pids;
  for (int q = 0; q < state.nranks; ++q) {
    const std::string path = state.folder + "/init.r" + std::to_string(q);
    if (!exists(path)) return ncclInProgress;
    std::vector<char> text;
    std::string why;
    const bool read = read_file(path, &text, &why);
    const std::string content(text.begin(), text.end());  // "<world size> <pid>"
    const size_t space = content.find(' ');
    const std::string world = content.substr(0, space);
    if (!read || world != std::to_string(state.nranks)) {
      if (why.empty()) {
        why = "rank " + std::to_string(q) + " initialised a world of " + world + ", rank " + std::to_string(state.rank) +
              " one of " + std::to_string(state.nranks);
      }
      std::lock_guard<std::mutex> lock(state.mu);
      state.async_error = ncclInvalidUsage;
      set_last_error("ncclCommInitRankConfig: " + why);
      return state.async_error;
    }
    pids.push_back(space == std::string::npos ? 0 : std::atol(content.c_str() + space + 1));
  }
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.pids = std::move(pids);
  }
  state.ready = true;
  return ncclSuccess;
}

void Exchange::report_if_gone(int q) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->async_error != ncclSuccess || static_cast<size_t>(q) >= state_->pids.size()) return;
  const long pid = state_->pids[static_cast<size_t>(q)];
  if (pid <= 0 || pid == static_cast<long>(::getpid()) || !process_gone(pid)) return;
  state_->async_error = ncclRemoteError;
  set_last_error("rank " + std::to_string(q) + " (process " + std::to_string(pid) + ") exited before " +
                 op_.name + " (collective #" + std::to_string(seq_) + ") reached it; its connection closed");
}

std::string Exchange::part(int from, int to) const {
  return state_->folder + "/c" + std::to_string(seq_) + ".r" + std::to_string(from) +
         (to >= 0 ? ".to" + std::to_string(to) : std::string());
}

std::string Exchange::failed(const std::string& why) {
  const std::string text = std::string(op_.name) + " (collective #" + std::to_string(seq_) + " of rank " +
                           std::to_string(state_->rank) + "): " + why;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->async_error == ncclSuccess) state_->async_error = ncclUnhandledCudaError;
  set_last_error(text);
  return "emulated NCCL: " + text;
}

std::optional<std::string> Exchange::poll() {
  if (state_->aborted) return std::string();  // the aborted kernels exit
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->completed != seq_) return std::nullopt;  // an earlier collective first
  }
  if (!deposited_) {
    const std::string why = deposit();
    if (!why.empty()) return failed(why);
    deposited_ = true;
  }
  for (int q = 0; q < state_->nranks; ++q) {
    if (exists(part(q))) continue;
    if (peer_death_is_remote_error()) report_if_gone(q);
    return std::nullopt;  // as NCCL's kernel, spin until every rank is here (or an abort)
  }
  const std::string why = combine();
  if (!why.empty()) return failed(why);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->completed = seq_ + 1;
  // Every rank has read this rank's parts of collective #seq - 2: it wrote its part of #seq,
  // which it does only after finishing #seq - 1, hence #seq - 2.
  if (seq_ >= 2) {
    for (const std::string& path : state_->written[seq_ - 2]) (void)std::remove(path.c_str());
    state_->written.erase(seq_ - 2);
  }
  return std::string();
}

// This rank's part: its send buffer (all of it: each rank takes what it needs), the root's
// alone for a broadcast, a group's sends one file a peer; the file named part(rank) last,
// so that its presence says all of this rank's parts are there.
std::string Exchange::deposit() {
  const int rank = state_->rank;
  const size_t bytes = op_.count * type_size(op_.type);
  std::string why;
  // Every file written is kept for removal two collectives later (poll).
  auto put = [&](const std::string& path, const void* data, size_t n) {
    if (!write_file(path, data, n, &why)) return false;
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->written[seq_].push_back(path);
    return true;
  };
  for (const Transfer& t : op_.transfers) {
    if (!t.send) continue;
    if (!zdp::testing::in_emulated_allocation(t.ptr, t.bytes)) {
      return "the send buffer for rank " + std::to_string(t.peer) + " is no longer live device memory";
    }
    if (!put(part(rank, t.peer), t.ptr, t.bytes)) return why;
  }
  size_t mine = 0;
  switch (op_.kind) {
    case Op::Kind::kAllReduce:
    case Op::Kind::kAllGather: mine = bytes; break;
    case Op::Kind::kReduceScatter: mine = bytes * static_cast<size_t>(state_->nranks); break;
    case Op::Kind::kBroadcast: mine = op_.root == rank ? bytes : 0; break;
    case Op::Kind::kGroup: mine = 0; break;
  }
  if (mine > 0 && !zdp::testing::in_emulated_allocation(op_.send, mine)) {
    return "its send buffer is no longer " + std::to_string(mine) + " bytes of live device memory (freed?)";
  }
  if (!put(part(rank), op_.send, mine)) return why;
  return std::string();
}

// Reads every rank's part and writes this rank's result.
std::string Exchange::combine() {
  const int rank = state_->rank, n = state_->nranks;
  const size_t bytes = op_.count * type_size(op_.type);
  std::vector<char> data;
  std::string why;
  if (op_.kind == Op::Kind::kGroup) {
    for (const Transfer& t : op_.transfers) {
      if (t.send) continue;
      if (!exists(part(t.peer, rank))) return "rank " + std::to_string(t.peer) + " sent nothing to this rank";
      if (!read_file(part(t.peer, rank), &data, &why)) return why;
      if (data.size() != t.bytes) {
        return "rank " + std::to_string(t.peer) + " sent " + std::to_string(data.size()) + " bytes, this rank receives " +
               std::to_string(t.bytes);
      }
      if (!zdp::testing::in_emulated_allocation(t.ptr, t.bytes)) return "a receive buffer is no longer live device memory";
      std::memcpy(t.ptr, data.data(), t.bytes);
    }
    return std::string();
  }
  const size_t out_bytes = op_.kind == Op::Kind::kAllGather ? bytes * static_cast<size_t>(n) : bytes;
  if (out_bytes > 0 && !zdp::testing::in_emulated_allocation(op_.recv, out_bytes)) {
    return "its receive buffer is no longer " + std::to_string(out_bytes) + " bytes of live device memory (freed?)";
  }
  std::vector<char> result(out_bytes);
  for (int q = 0; q < n; ++q) {
    if (op_.kind == Op::Kind::kBroadcast && q != op_.root) continue;
    if (!read_file(part(q), &data, &why)) return why;
    const size_t expected = op_.kind == Op::Kind::kReduceScatter ? bytes * static_cast<size_t>(n) : bytes;
    if (data.size() != expected) {
      return "rank " + std::to_string(q) + " gave " + std::to_string(data.size()) + " bytes, this rank expects " +
             std::to_string(expected) + " (the ranks called it with different counts or types)";
    }
    switch (op_.kind) {
      case Op::Kind::kAllReduce: accumulate(op_.type, op_.red, n, q == 0, result.data(), data.data(), op_.count); break;
      case Op::Kind::kReduceScatter:
        accumulate(op_.type, op_.red, n, q == 0, result.data(), data.data() + static_cast<size_t>(rank) * bytes, op_.count);
        break;
      case Op::Kind::kAllGather: std::memcpy(result.data() + static_cast<size_t>(q) * bytes, data.data(), bytes); break;
      case Op::Kind::kBroadcast: std::memcpy(result.data(), data.data(), bytes); break;
      case Op::Kind::kGroup: break;
    }
  }
  if (out_bytes > 0) std::memcpy(op_.recv, result.data(), out_bytes);
  return std::string();
}

}  // namespace zdp_emu

// zdp's NCCL communicator (runtime/src/comm/nccl/) on the emulated NCCL and GPU
// (testing/simt/nccl_emulation.h): every test of tests/gpu/nccl_comm_test.cc, among them
// the two-rank ones (ranks as threads on emulated devices 0 and 1), which no lent machine
// has run (one GPU each): every collective and type against closed forms, and a peer that
// never comes timing out in the watchdog, naming the collective. The emulation's own
// tests are tests/simt/nccl_emulation_test.cc.
#include "testing/simt/nccl_emulation.h"
// The GPU test itself, its create_cuda_device and cuda_device_count the emulated ones.
#include "tests/gpu/nccl_comm_test.cc"
#include "testing/temp_dir.h"

namespace {

// The folder the emulated NCCL exchanges through, for the whole test binary.
class EmulatedNcclFolder : public ::testing::Environment {
 public:
  void SetUp() override {
    folder_ = std::make_unique<zdp::testing::TempDir>();
    zdp::testing::set_emulated_nccl_directory(folder_->path());
  }
  void TearDown() override {
    zdp::testing::set_emulated_nccl_directory("");
    folder_.reset();
  }

 private:
  std::unique_ptr<zdp::testing::TempDir> folder_;
};

::testing::Environment* const kFolder = ::testing::AddGlobalTestEnvironment(new EmulatedNcclFolder);

}  // namespace

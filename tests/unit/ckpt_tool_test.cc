// dp-ckpt's functions (tools/ckpt_tool.h) on a real checkpoint: the engine's TinyMlp on
// one rank, trained for 3 steps and saved. info lists every tensor, verify names a
// damaged file and chunk, export writes the masters bit for bit in fp32 and rounded to
// nearest even in bf16/fp16, the same file whatever the buffer size.
#include "tools/ckpt_tool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "testing/engine_runs.h"
#include "zdp/safetensors.h"

namespace zdp {
namespace {

namespace fs = std::filesystem;

// Round to nearest even from the bits, written independently of kernels/convert.h.
uint16_t bf16_rne(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);  // finite values
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

// XORs `mask` into the byte `from_end` bytes before the end of `path` (a damaged chunk).
void flip_bits_from_end(const std::string& path, int from_end, char mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ mask);
  f.seekp(-from_end, std::ios::end);
  f.write(&c, 1);
}

// A TinyMlp checkpoint of one rank after 3 steps, and the masters it must hold (by name).
class CkptTool : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("zdp_ckpt_tool_" + std::to_string(::getpid())));
    masters_ = new std::vector<std::pair<std::string, std::vector<float>>>;
    fs::create_directories(*dir_);
    InMemoryStore store;
    Context ctx = testing::make_test_context(0, 1, store).value();
    EngineOptions o;
    o.zero.stage = 1;
    o.zero.bucket_mb = 200.0 * 4 / (1 << 20);
    o.optim.lr = 1e-2;
    Engine engine(ctx, o);
    testing::TinyMlp model = testing::TinyMlp::create(engine).value();
    ASSERT_TRUE(engine.finalize().ok());
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(model.train_micro<float>(engine, step, 0, 8).ok());
      ASSERT_TRUE(engine.step().ok());
    }
    CheckpointState state;
    state.step = 3;
    state.data_position = 24;
    state.trainer_json = R"({"program": "test", "config": "[train]\nsteps = 3\n"})";
    StatusOr<std::string> saved = engine.save_checkpoint((*dir_ / "ckpt").string(), state);
    ASSERT_TRUE(saved.ok()) << saved.status().to_string();
    const std::vector<std::string> names = engine.param_names();
    for (size_t i = 0; i < names.size(); ++i) {
      masters_->emplace_back(names[i], engine.gather_master(Param{static_cast<int>(i)}).value());
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete masters_;
  }
  static std::string checkpoint() { return (*dir_ / "ckpt" / "step-3").string(); }
  static std::string root() { return (*dir_ / "ckpt").string(); }
  static std::string out(const std::string& name) { return (*dir_ / name).string(); }

  // Every tensor of the safetensors file `path` as raw bytes, in file order.
  static std::vector<std::pair<safetensors::TensorInfo, std::vector<unsigned char>>> tensors(const std::string& path) {
    std::vector<std::pair<safetensors::TensorInfo, std::vector<unsigned char>>> out;
    StatusOr<safetensors::Reader> r = safetensors::Reader::open(path);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return out;
    for (const safetensors::TensorInfo& t : r->header().tensors) {
      std::vector<unsigned char> bytes(static_cast<size_t>(t.bytes()));
      EXPECT_TRUE(r->read(t.begin, bytes.data(), t.bytes()).ok());
      out.emplace_back(t, std::move(bytes));
    }
    return out;
  }

  static fs::path* dir_;
  static std::vector<std::pair<std::string, std::vector<float>>>* masters_;
};

fs::path* CkptTool::dir_ = nullptr;
std::vector<std::pair<std::string, std::vector<float>>>* CkptTool::masters_ = nullptr;

TEST(CkptToolText, ShapesAndSizes) {
  EXPECT_EQ(format_shape({768, 3072}), "[768, 3072]");
  EXPECT_EQ(format_shape({}), "[]");
  EXPECT_EQ(ckpt_tool::human_bytes(512), "512 B");
  EXPECT_EQ(ckpt_tool::human_bytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(ckpt_tool::human_bytes(int64_t{5} << 30), "5.0 GiB");
}

TEST_F(CkptTool, InfoListsEveryTensorAndTheSavedState) {
  StatusOr<std::string> text = ckpt_tool::describe(root());  // a root: its newest checkpoint
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_NE(text->find("step-3"), std::string::npos) << *text;
  EXPECT_NE(text->find("3 (data position 24, optimizer step 3)"), std::string::npos) << *text;
  EXPECT_NE(text->find("1 rank(s), ZeRO stage 1, fp32 compute"), std::string::npos) << *text;
  EXPECT_NE(text->find("\"program\":\"test\""), std::string::npos) << *text;
  EXPECT_EQ(text->find("steps = 3"), std::string::npos) << "the config is printed by --config only\n" << *text;
  // fc0.weight is [24, 8] fp32: 768 bytes; one row per tensor.
  EXPECT_NE(text->find("fc0.weight  F32    [24, 8]   768"), std::string::npos) << *text;
  for (const auto& [name, values] : *masters_) EXPECT_NE(text->find(name), std::string::npos) << name;
  StatusOr<std::string> config = ckpt_tool::saved_config(checkpoint());
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(*config, "[train]\nsteps = 3\n");
}

TEST_F(CkptTool, ExportFp32IsTheMastersBitForBit) {
  StatusOr<ckpt_tool::ExportReport> r = ckpt_tool::export_model(checkpoint(), {DType::kF32, out("fp32.safetensors")});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tensors, static_cast<int64_t>(masters_->size()));
  EXPECT_EQ(r->bytes, static_cast<int64_t>(fs::file_size(out("fp32.safetensors"))));
  EXPECT_FALSE(fs::exists(out("fp32.safetensors.tmp")));
  const auto got = tensors(out("fp32.safetensors"));
  ASSERT_EQ(got.size(), masters_->size());
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& [name, master] = (*masters_)[i];
    EXPECT_EQ(got[i].first.name, name);
    EXPECT_EQ(got[i].first.dtype, "F32");
    ASSERT_EQ(got[i].second.size(), master.size() * 4) << name;
    EXPECT_EQ(std::memcmp(got[i].second.data(), master.data(), got[i].second.size()), 0) << name;
  }
  EXPECT_EQ(safetensors::Reader::open(out("fp32.safetensors"))->header().metadata.at("format"), "pt");
}

// A 7-element buffer cuts every tensor (sizes 192, 24, 576, 96) at odd offsets: the file
// must be the one a buffer larger than any tensor writes, and each element the nearest
// even rounding of its master.
TEST_F(CkptTool, ExportBf16AndFp16StreamWithASmallBufferAndRoundToNearestEven) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const std::string small = out(std::string("small_") + to_string(dtype)), large = out("large");
    ckpt_tool::ExportOptions o{dtype, small, 7};
    StatusOr<ckpt_tool::ExportReport> r = ckpt_tool::export_model(checkpoint(), o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->buffer_bytes, 7 * 4 + 7 * 2);  // all the tensor data it held at once
    o.out = large;
    o.buffer_elems = 1 << 20;
    o.force = true;  // "large" is this loop's own file from the previous dtype
    ASSERT_TRUE(ckpt_tool::export_model(checkpoint(), o).ok());
    EXPECT_EQ(file_bytes(small), file_bytes(large)) << to_string(dtype);
    const auto got = tensors(small);
    ASSERT_EQ(got.size(), masters_->size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::vector<float>& master = (*masters_)[i].second;
      EXPECT_EQ(got[i].first.dtype, dtype == DType::kBF16 ? "BF16" : "F16");
      ASSERT_EQ(got[i].second.size(), master.size() * 2);
      for (size_t k = 0; k < master.size(); ++k) {
        uint16_t bits;
        std::memcpy(&bits, got[i].second.data() + 2 * k, 2);
        if (dtype == DType::kBF16) {
          ASSERT_EQ(bits, bf16_rne(master[k])) << (*masters_)[i].first << "[" << k << "] = " << master[k];
        } else {
          // fp16 has 10 fraction bits: the decoded value is the representable one nearest
          // the master (|master| < 2 here: spacing 2^-10 or finer), ties to even.
          const float back = kernels::f16_to_f32(bits);
          const double spacing = std::ldexp(1.0, std::ilogb(std::max(std::fabs(master[k]), 0x1p-14f)) - 10);
          ASSERT_LE(std::fabs(static_cast<double>(back) - master[k]), spacing / 2)
              << (*masters_)[i].first << "[" << k << "] = " << master[k];
        }
      }
    }
  }
}

// A finite weight beyond fp16's range becomes infinity in an fp16 export: counted per
// tensor (dp-ckpt warns), not in bf16. The weight is written into a copy of the checkpoint
// (so its checksum no longer holds: exported without verifying).
TEST_F(CkptTool, ExportCountsTheValuesThatBecameInfinite) {
  const fs::path copy = out("large-weight");
  fs::create_directories(copy);
  fs::copy(checkpoint(), copy / "step-3", fs::copy_options::recursive);
  const std::string model = (copy / "step-3" / "model.safetensors").string();
  StatusOr<safetensors::Reader> r = safetensors::Reader::open(model);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const safetensors::TensorInfo first = r->header().tensors.front();
  const int64_t at = r->data_start() + first.begin;
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    const float big = 1e5f;
    f.seekp(at);
    f.write(reinterpret_cast<const char*>(&big), 4);
  }
  ckpt_tool::ExportOptions o{DType::kF16, out("large-weight.f16")};
  o.verify = false;
  StatusOr<ckpt_tool::ExportReport> half = ckpt_tool::export_model((copy / "step-3").string(), o);
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  EXPECT_EQ(half->overflowed, 1);
  ASSERT_EQ(half->overflowed_tensors.size(), 1u);
  EXPECT_EQ(half->overflowed_tensors[0].first, first.name);
  o.dtype = DType::kBF16;
  o.out = out("large-weight.bf16");
  StatusOr<ckpt_tool::ExportReport> brain = ckpt_tool::export_model((copy / "step-3").string(), o);
  ASSERT_TRUE(brain.ok()) << brain.status().to_string();
  EXPECT_EQ(brain->overflowed, 0);
}

TEST_F(CkptTool, RefusalsNameWhatIsWrong) {
  StatusOr<ckpt_tool::ExportReport> inside =
      ckpt_tool::export_model(checkpoint(), {DType::kBF16, checkpoint() + "/model.safetensors"});
  ASSERT_FALSE(inside.ok());
  EXPECT_NE(inside.status().message().find("inside a checkpoint"), std::string::npos) << inside.status().message();
  EXPECT_TRUE(fs::exists(checkpoint() + "/model.safetensors"));
  // --force through a link to the checkpoint's own file, or into another checkpoint: both
  // used to replace a checkpoint's file (a bf16 export destroyed an fp32 checkpoint).
  const std::string model = checkpoint() + "/model.safetensors";
  const auto model_bytes = fs::file_size(model);
  fs::create_symlink(model, out("link-into-checkpoint"));
  ckpt_tool::ExportOptions through{DType::kBF16, out("link-into-checkpoint")};
  through.force = true;
  StatusOr<ckpt_tool::ExportReport> linked = ckpt_tool::export_model(checkpoint(), through);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("(a link to " + fs::canonical(model).string() + ") is inside a checkpoint"),
            std::string::npos) << linked.status().message();
  EXPECT_EQ(fs::file_size(model), model_bytes);
  fs::create_directories(out("other-step"));
  { std::ofstream(out("other-step/state.json")) << "{}"; }
  ckpt_tool::ExportOptions other{DType::kBF16, out("other-step/model.safetensors")};
  other.force = true;
  StatusOr<ckpt_tool::ExportReport> sibling = ckpt_tool::export_model(checkpoint(), other);
  ASSERT_FALSE(sibling.ok());
  EXPECT_NE(sibling.status().message().find("is inside a checkpoint"), std::string::npos) << sibling.status().message();
  // The folder of checkpoints itself: --force would replace its `latest` pointer.
  ASSERT_TRUE(fs::exists(root() + "/latest"));
  const std::vector<unsigned char> pointer = file_bytes(root() + "/latest");
  ckpt_tool::ExportOptions over_latest{DType::kBF16, root() + "/latest"};
  over_latest.force = true;
  StatusOr<ckpt_tool::ExportReport> at_root = ckpt_tool::export_model(checkpoint(), over_latest);
  ASSERT_FALSE(at_root.ok());
  EXPECT_NE(at_root.status().message().find("is inside a checkpoint"), std::string::npos) << at_root.status().message();
  EXPECT_EQ(file_bytes(root() + "/latest"), pointer);
  StatusOr<ckpt_tool::ExportReport> missing = ckpt_tool::export_model(out("nowhere"), {DType::kF32, out("x")});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(out("nowhere")), std::string::npos) << missing.status().message();
  StatusOr<ckpt_tool::ExportReport> no_buffer = ckpt_tool::export_model(checkpoint(), {DType::kF32, out("y"), 0});
  EXPECT_FALSE(no_buffer.ok());
  // A folder that does not exist is named as the folder (it was the temporary file's
  // "No such file or directory", after the whole checksum pass).
  StatusOr<ckpt_tool::ExportReport> no_folder =
      ckpt_tool::export_model(checkpoint(), {DType::kF32, out("no-such-folder/m.safetensors")});
  ASSERT_FALSE(no_folder.ok());
  EXPECT_NE(no_folder.status().message().find("the output's folder " + out("no-such-folder") + " does not exist"),
            std::string::npos) << no_folder.status().message();
}

// The output is never replaced unless asked: an existing file only with force; a device,
// a directory or a FIFO never (it used to write out.tmp and rename it over them: --out
// /dev/null turned the device into a regular file); a symlink is written through to the
// regular file it names, or refused.
TEST_F(CkptTool, ExportNeverReplacesWhatItWasNotAskedTo) {
  auto refusal = [&](const std::string& target, bool force = false) {
    ckpt_tool::ExportOptions o{DType::kF32, target};
    o.force = force;
    StatusOr<ckpt_tool::ExportReport> r = ckpt_tool::export_model(checkpoint(), o);
    return r.ok() ? std::string("written") : r.status().message();
  };
  const std::string dir = out("a-directory");
  fs::create_directories(dir);
  EXPECT_NE(refusal(dir).find("is a directory: refused"), std::string::npos) << refusal(dir);
  const std::string fifo = out("a-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(refusal(fifo).find("is a FIFO (named pipe): refused"), std::string::npos);
  EXPECT_TRUE(fs::is_fifo(fifo));
  // A device: the export must not touch it (with or without force).
  EXPECT_NE(refusal("/dev/null", true).find("is a character device: refused"), std::string::npos);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  const std::string existing = out("existing.safetensors");
  { std::ofstream(existing) << "keep me"; }
  EXPECT_NE(refusal(existing).find("exists: refused (pass --force"), std::string::npos);
  EXPECT_EQ(file_bytes(existing).size(), 7u);
  ASSERT_EQ(::chmod(existing.c_str(), 0600), 0);
  EXPECT_EQ(refusal(existing, true), "written");
  EXPECT_TRUE(safetensors::Reader::open(existing).ok());
  EXPECT_EQ(fs::status(existing).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write)
      << "a private file replaced by --force stays private";

  // Through a symlink to a regular file: the link stays a link, its target is replaced.
  const std::string target = out("target.safetensors"), link = out("link.safetensors");
  { std::ofstream(target) << "old"; }
  fs::create_symlink(target, link);
  EXPECT_EQ(refusal(link, true), "written");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(safetensors::Reader::open(target).ok());
  // A symlink to a directory or to nothing is refused.
  const std::string to_dir = out("link-to-dir"), dangling = out("dangling");
  fs::create_directory_symlink(dir, to_dir);
  fs::create_symlink(out("nothing-here"), dangling);
  EXPECT_NE(refusal(to_dir, true).find("which is a directory: refused"), std::string::npos) << refusal(to_dir, true);
  EXPECT_NE(refusal(dangling, true).find("symbolic link to nothing that exists"), std::string::npos)
      << refusal(dangling, true);
  EXPECT_FALSE(fs::exists(out("nothing-here")));
  // A link planted at the temporary name (dangling: access() saw nothing there) is refused,
  // and the file it names is not created.
  const std::string fresh = out("fresh.safetensors");
  fs::create_symlink(out("planted-target"), fresh + ".tmp-" + std::to_string(::getpid()));
  EXPECT_NE(refusal(fresh).find("the temporary file"), std::string::npos) << refusal(fresh);
  EXPECT_FALSE(fs::exists(out("planted-target")));
}

// `dp-ckpt info` of a regular file says it is a file, not that a directory is missing; of
// a FIFO, that it is a FIFO (it was called a file).
TEST_F(CkptTool, InfoOfAFileSaysItIsAFile) {
  StatusOr<std::string> r = ckpt_tool::describe(checkpoint() + "/model.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a regular file, not a checkpoint directory"), std::string::npos)
      << r.status().message();
  const std::string fifo = out("info-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  StatusOr<std::string> f = ckpt_tool::describe(fifo);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("is a FIFO (named pipe), not a checkpoint directory"), std::string::npos)
      << f.status().message();
}

// Export reads the model file only, so only its checksums are checked: a damaged
// optimizer file fails `verify` but does not block exporting intact weights.
TEST_F(CkptTool, ExportIsNotBlockedByADamagedOptimizerFile) {
  // One bit of the optimizer file's last bytes, flipped back at the end (the next test
  // verifies the whole checkpoint first).
  const auto flip = [&] { flip_bits_from_end(checkpoint() + "/optimizer.safetensors", 3, 0x10); };
  flip();
  StatusOr<std::string> bad = ckpt_tool::verify(checkpoint());
  StatusOr<ckpt_tool::ExportReport> r = ckpt_tool::export_model(checkpoint(), {DType::kF32, out("weights")});
  flip();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("optimizer.safetensors"), std::string::npos) << bad.status().message();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(fs::exists(out("weights")));
  EXPECT_TRUE(ckpt_tool::verify(checkpoint()).ok());
  // Nor info by a missing one (it failed outright): the rest described, the file's problem named.
  fs::rename(checkpoint() + "/optimizer.safetensors", checkpoint() + "/optimizer.away");
  StatusOr<std::string> text = ckpt_tool::describe(checkpoint());
  fs::rename(checkpoint() + "/optimizer.away", checkpoint() + "/optimizer.safetensors");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_NE(text->find("optimizer state: unreadable: "), std::string::npos) << *text;
  EXPECT_NE(text->find("fc0.weight"), std::string::npos) << "the model's tensors still listed\n" << *text;
  // Another file's tensors (one, for several parameters) are not "none (sgd ...)".
  fs::rename(checkpoint() + "/optimizer.safetensors", checkpoint() + "/optimizer.away");
  {
    StatusOr<safetensors::Writer> w = safetensors::Writer::create(
        checkpoint() + "/optimizer.safetensors", safetensors::make_header({{"x", "F32", {1}}}).value());
    ASSERT_TRUE(w.ok() && w->close().ok());
  }
  text = ckpt_tool::describe(checkpoint());
  fs::remove(checkpoint() + "/optimizer.safetensors");
  fs::rename(checkpoint() + "/optimizer.away", checkpoint() + "/optimizer.safetensors");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_NE(text->find("optimizer state: 1 tensors for " + std::to_string(masters_->size()) +
                       " parameters, not 0, 1 or 2 each"),
            std::string::npos)
      << *text;
}

// A step-<N> folder holds step N: a folder renamed or linked over another step is refused
// by everything that reads it (info, verify, export, a resume), naming both steps.
TEST_F(CkptTool, AFolderNamedForAnotherStepIsRefused) {
  const std::string other = out("renamed");
  fs::create_directories(other);
  fs::create_directory_symlink(checkpoint(), other + "/step-9");
  StatusOr<std::string> text = ckpt_tool::describe(other + "/step-9");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("step-9 is named for step 9 but its state.json holds step 3"),
            std::string::npos)
      << text.status().message();
  std::ofstream(other + "/latest") << "step-9\n";
  EXPECT_FALSE(ckpt_tool::verify(other).ok());
  fs::remove(other + "/step-9");
  fs::create_directory_symlink(checkpoint(), other + "/best");  // any other name: read as it is
  EXPECT_TRUE(ckpt_tool::describe(other + "/best").ok());
}

// Runs last in this file (gtest keeps declaration order): it damages the checkpoint.
TEST_F(CkptTool, VerifyPassesThenNamesTheDamagedFileAndChunk) {
  StatusOr<std::string> ok = ckpt_tool::verify(checkpoint());
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_NE(ok->find("every checksum matches"), std::string::npos) << *ok;
  flip_bits_from_end(checkpoint() + "/model.safetensors", 5, 0x40);
  StatusOr<std::string> bad = ckpt_tool::verify(checkpoint());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("model.safetensors"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("chunk"), std::string::npos) << bad.status().message();
  StatusOr<ckpt_tool::ExportReport> r = ckpt_tool::export_model(checkpoint(), {DType::kF32, out("z")});
  EXPECT_FALSE(r.ok()) << "export verifies first";
  EXPECT_FALSE(fs::exists(out("z")));
}

}  // namespace
}  // namespace zdp

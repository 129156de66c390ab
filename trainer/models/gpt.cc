// The gpt model: a GPT-2-style decoder. Token + position embeddings (group 0), n_layers
// pre-LayerNorm blocks x += attn(ln1(x)); x += mlp(ln2(x)) with causal multi-head
// attention and a 4d GELU MLP (group 1 + l each), a final LayerNorm (group n_layers + 1)
// and the LM head tied to the token embedding, trained with next-token cross-entropy.
// Activations of every block are kept for backward (no recomputation); attention keeps
// its probabilities (batched path) or only their log-sum-exp (fused path, attention.h).
#include <cmath>
#include <string>
#include <vector>

#include "trainer/models/attention.h"
#include "trainer/models/model.h"

namespace zdp::trainer {
namespace {

using kernels::OutputMode;

struct Block {
  Param ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
  // Activations of the current micro-batch; x_in is the block's input (the residual stream).
  DeviceBuffer x_in, ln1, ln1_mean, ln1_rstd, qkv, probs, attn_stats, attn_y, x_mid, ln2, ln2_mean, ln2_rstd, fc_pre, fc_act;
};

class Gpt : public Model {
 public:
  Gpt(const ModelConfig& c, int64_t micro, Ops* ops)
      : Model(ops, c.dtype), L_(c.n_layers), C_(c.d_model), H_(c.n_heads), V_(c.vocab_size), T_(c.seq_len), std_(static_cast<float>(c.init_std)),
        B_(micro), attention_(c.attention), blocks_(static_cast<size_t>(c.n_layers)) {}

  Status declare_params(const DeclareParam& declare) override {
    // GPT-2's initialisation: N(0, std) weights, the residual projections scaled by
    // 1/sqrt(2 n_layers) (two per block add to the stream), zero biases, unit norms.
    const Init w = Init::normal(std_), proj = Init::normal(std_ / std::sqrt(2.0f * static_cast<float>(L_)));
    ZDP_ASSIGN_OR_RETURN(wte_, declare("wte.weight", {V_, C_}, w, 0));
    ZDP_ASSIGN_OR_RETURN(wpe_, declare("wpe.weight", {T_, C_}, w, 0));
    for (int l = 0; l < L_; ++l) {
      Block& b = blocks_[static_cast<size_t>(l)];
      const std::string n = "blocks." + std::to_string(l) + ".";
      const int g = 1 + l;
      ZDP_ASSIGN_OR_RETURN(b.ln1_w, declare(n + "norm1.weight", {C_}, Init::constant(1), g));
      ZDP_ASSIGN_OR_RETURN(b.ln1_b, declare(n + "norm1.bias", {C_}, Init::zeros(), g));
      ZDP_ASSIGN_OR_RETURN(b.qkv_w, declare(n + "attn.qkv.weight", {3 * C_, C_}, w, g));
      ZDP_ASSIGN_OR_RETURN(b.qkv_b, declare(n + "attn.qkv.bias", {3 * C_}, Init::zeros(), g));
      ZDP_ASSIGN_OR_RETURN(b.proj_w, declare(n + "attn.proj.weight", {C_, C_}, proj, g));
      ZDP_ASSIGN_OR_RETURN(b.proj_b, declare(n + "attn.proj.bias", {C_}, Init::zeros(), g));
      ZDP_ASSIGN_OR_RETURN(b.ln2_w, declare(n + "norm2.weight", {C_}, Init::constant(1), g));
      ZDP_ASSIGN_OR_RETURN(b.ln2_b, declare(n + "norm2.bias", {C_}, Init::zeros(), g));
      ZDP_ASSIGN_OR_RETURN(b.fc_w, declare(n + "mlp.fc.weight", {4 * C_, C_}, w, g));
      ZDP_ASSIGN_OR_RETURN(b.fc_b, declare(n + "mlp.fc.bias", {4 * C_}, Init::zeros(), g));
      ZDP_ASSIGN_OR_RETURN(b.fc_proj_w, declare(n + "mlp.proj.weight", {C_, 4 * C_}, proj, g));
      ZDP_ASSIGN_OR_RETURN(b.fc_proj_b, declare(n + "mlp.proj.bias", {C_}, Init::zeros(), g));
    }
    ZDP_ASSIGN_OR_RETURN(lnf_w_, declare("norm_f.weight", {C_}, Init::constant(1), L_ + 1));
    ZDP_ASSIGN_OR_RETURN(lnf_b_, declare("norm_f.bias", {C_}, Init::zeros(), L_ + 1));
    return Status::Ok();
  }

  Status forward_backward(Engine& e, const Batch& batch, const LossSink& loss) override {
    return run(e, batch, &loss).status();
  }
  StatusOr<double> eval_micro(Engine& e, const Batch& batch) override { return run(e, batch, nullptr); }
  int64_t tokens_per_sample() const override { return T_; }
  double flops_per_sample() const override {
    // PaLM's count (Chowdhery et al. 2022, appendix B; nanoGPT's): 6 flops per weight of
    // the dense layers and token, plus attention's 12 L T d per token. The dense weights
    // are the blocks' four linears and the LM head (the tied embedding, V d); the position
    // embedding is a lookup, no matmul (nanoGPT's get_num_params leaves it out too; it was
    // counted, 0.55% too many for gpt2-124m). llm.c counts all parameters and 6 L T d (the
    // causal half): 6% fewer for gpt2-124m (dp-launch plan --gpu prints both).
    const double params = static_cast<double>(V_) * C_ + static_cast<double>(L_) * 12.0 * C_ * C_;
    return static_cast<double>(T_) * (6.0 * params + 12.0 * L_ * static_cast<double>(T_) * C_);
  }
  double grad_ready_fraction(int layer_group) const override {
    // Backward's FLOPs a token (2/3 of flops_per_sample's): the LM head's dx and dW first
    // (4 V d; norm_f's group, L + 1, is complete after it), then each block's (48 d^2 and
    // attention's 8 T d) from the last (group L) to the first (group 1); the tied
    // embedding and the position table (group 0) only at the end, in the embedding's
    // backward (the head's share of wte waits for it).
    const double head = 4.0 * static_cast<double>(V_) * C_;
    const double block = 48.0 * C_ * static_cast<double>(C_) + 8.0 * static_cast<double>(T_) * C_;
    const double total = head + static_cast<double>(L_) * block;
    if (layer_group <= 0) return 1.0;
    if (layer_group > L_) return head / total;
    return (head + static_cast<double>(L_ - layer_group + 1) * block) / total;
  }
  bool fused_attention() const override { return fused_; }
  // The tied embedding's group (0) inside the head's (L + 1), through the loss and the
  // head's backward.
  int nested_layer_scopes() const override { return 1; }
  std::string describe() const override {
    return "gpt " + std::to_string(L_) + " layers x d " + std::to_string(C_) + " (" + std::to_string(H_) +
           " heads), vocab " + std::to_string(V_) + ", seq " + std::to_string(T_);
  }

 private:
  StatusOr<DeviceBuffer> act(int64_t per_token) { return take(B_ * T_ * per_token, dtype_); }
  StatusOr<DeviceBuffer> stat() { return take(B_ * T_, DType::kF32); }

  Status allocate() override {
    // Decided once for the micro-batch's shape: a model without ops (model_spec) plans
    // what a GPU would run (plans_fused_attention).
    const AttentionShape full{B_, T_, H_, C_ / H_};
    if (ops_) {
      ZDP_ASSIGN_OR_RETURN(fused_, ops_->use_fused_attention(fused_shape(full, dtype_)));
    } else {
      ModelConfig m;
      m.attention = attention_;
      m.dtype = dtype_;
      fused_ = plans_fused_attention(m);
    }
    for (Block& b : blocks_) {
      ZDP_ASSIGN_OR_RETURN(b.x_in, act(C_));
      ZDP_ASSIGN_OR_RETURN(b.ln1, act(C_));
      ZDP_ASSIGN_OR_RETURN(b.ln1_mean, stat());
      ZDP_ASSIGN_OR_RETURN(b.ln1_rstd, stat());
      ZDP_ASSIGN_OR_RETURN(b.qkv, act(3 * C_));
      if (fused_) {
        ZDP_ASSIGN_OR_RETURN(b.attn_stats, take(AttentionSaved::stats_elements(full), DType::kF32));
      } else {
        ZDP_ASSIGN_OR_RETURN(b.probs, act(H_ * T_));
      }
      ZDP_ASSIGN_OR_RETURN(b.attn_y, act(C_));
      ZDP_ASSIGN_OR_RETURN(b.x_mid, act(C_));
      ZDP_ASSIGN_OR_RETURN(b.ln2, act(C_));
      ZDP_ASSIGN_OR_RETURN(b.ln2_mean, stat());
      ZDP_ASSIGN_OR_RETURN(b.ln2_rstd, stat());
      ZDP_ASSIGN_OR_RETURN(b.fc_pre, act(4 * C_));
      ZDP_ASSIGN_OR_RETURN(b.fc_act, act(4 * C_));
    }
    ZDP_ASSIGN_OR_RETURN(x_out_, act(C_));
    ZDP_ASSIGN_OR_RETURN(lnf_, act(C_));
    ZDP_ASSIGN_OR_RETURN(lnf_mean_, stat());
    ZDP_ASSIGN_OR_RETURN(lnf_rstd_, stat());
    ZDP_ASSIGN_OR_RETURN(logits_, act(V_));
    ZDP_ASSIGN_OR_RETURN(losses_, stat());
    ZDP_ASSIGN_OR_RETURN(tokens_, take_bytes(B_ * T_ * 4));
    ZDP_ASSIGN_OR_RETURN(targets_, take_bytes(B_ * T_ * 4));
    ZDP_ASSIGN_OR_RETURN(offsets_, take_bytes((V_ + 1) * 4));
    ZDP_ASSIGN_OR_RETURN(order_, take_bytes(B_ * T_ * 4));
    // Backward scratch, shared by the blocks.
    ZDP_ASSIGN_OR_RETURN(dx_, act(C_));
    ZDP_ASSIGN_OR_RETURN(dln_, act(C_));
    ZDP_ASSIGN_OR_RETURN(dattn_, act(C_));
    ZDP_ASSIGN_OR_RETURN(dqkv_, act(3 * C_));
    ZDP_ASSIGN_OR_RETURN(dfc_, act(4 * C_));
    if (!fused_) {
      ZDP_ASSIGN_OR_RETURN(dprobs_, act(H_ * T_));
    }
    ZDP_ASSIGN_OR_RETURN(dwte_head_, take(V_ * C_, DType::kF32));
    return Status::Ok();
  }

  StatusOr<void*> p(Engine& e, Param q) { return param_view(e, q, "gpt"); }
  StatusOr<void*> g(Engine& e, Param q) { return grad_view(e, q, "gpt"); }

  Status forward_block(Engine& e, Block& b, void* x_next, int64_t n) {
    const DType dt = ops_->dtype();
    ZDP_ASSIGN_OR_RETURN(void* ln1_w, p(e, b.ln1_w));
    ZDP_ASSIGN_OR_RETURN(void* ln1_b, p(e, b.ln1_b));
    ops_->region(KernelRegion::kLayernormFwd);
    ZDP_RETURN_IF_ERROR(ops_->layernorm({n, C_, dt, b.x_in.data(), ln1_w, ln1_b, b.ln1.data(), b.ln1_mean.as<float>(), b.ln1_rstd.as<float>()}));
    ZDP_ASSIGN_OR_RETURN(void* qkv_w, p(e, b.qkv_w));
    ZDP_ASSIGN_OR_RETURN(void* qkv_b, p(e, b.qkv_b));
    ops_->region(KernelRegion::kQkvFwd);
    ZDP_RETURN_IF_ERROR(ops_->linear(b.ln1.data(), qkv_w, qkv_b, b.qkv.data(), n, C_, 3 * C_));
    ZDP_ASSIGN_OR_RETURN(const AttentionSaved saved, attention_saved(b, n));
    ZDP_RETURN_IF_ERROR(attention_forward(*ops_, shape(n), b.qkv.data(), saved, b.attn_y.data()));
    ZDP_ASSIGN_OR_RETURN(void* proj_w, p(e, b.proj_w));
    ZDP_ASSIGN_OR_RETURN(void* proj_b, p(e, b.proj_b));
    ops_->region(KernelRegion::kProjFwd);
    ZDP_RETURN_IF_ERROR(ops_->linear(b.attn_y.data(), proj_w, proj_b, b.x_mid.data(), n, C_, C_));
    ZDP_ASSIGN_OR_RETURN(void* ln2_w, p(e, b.ln2_w));
    ZDP_ASSIGN_OR_RETURN(void* ln2_b, p(e, b.ln2_b));
    // x_mid += x_in, then its norm: one kernel (the add's bits; layernorm.h).
    ops_->region(KernelRegion::kResidualLayernormFwd);
    ZDP_RETURN_IF_ERROR(ops_->layernorm({n, C_, dt, b.x_mid.data(), ln2_w, ln2_b, b.ln2.data(), b.ln2_mean.as<float>(),
                                         b.ln2_rstd.as<float>(), 1e-5f, b.x_in.data(), b.x_mid.data()}));
    ZDP_ASSIGN_OR_RETURN(void* fc_w, p(e, b.fc_w));
    ZDP_ASSIGN_OR_RETURN(void* fc_b, p(e, b.fc_b));
    ops_->region(KernelRegion::kFcFwd);
    ZDP_RETURN_IF_ERROR(ops_->linear_gelu(b.ln2.data(), fc_w, fc_b, b.fc_pre.data(), b.fc_act.data(), n, C_, 4 * C_));
    ZDP_ASSIGN_OR_RETURN(void* fp_w, p(e, b.fc_proj_w));
    ZDP_ASSIGN_OR_RETURN(void* fp_b, p(e, b.fc_proj_b));
    // x_next = fc_proj(fc_act) + x_mid: the residual added in the GEMM.
    ops_->region(KernelRegion::kFcProjFwd);
    ZDP_RETURN_IF_ERROR(ops_->linear(b.fc_act.data(), fp_w, fp_b, x_next, n, 4 * C_, C_, b.x_mid.data()));
    ops_->end_region();  // the engine's work between layers is not the model's
    return Status::Ok();
  }

  // dx_ holds d loss / d (block output); leaves d loss / d (block input) there.
  Status backward_block(Engine& e, Block& b, int64_t n) {
    const DType dt = ops_->dtype();
    ZDP_ASSIGN_OR_RETURN(void* fp_w, p(e, b.fc_proj_w));
    ZDP_ASSIGN_OR_RETURN(void* fc_w, p(e, b.fc_w));
    ZDP_ASSIGN_OR_RETURN(void* ln2_w, p(e, b.ln2_w));
    ZDP_ASSIGN_OR_RETURN(void* proj_w, p(e, b.proj_w));
    ZDP_ASSIGN_OR_RETURN(void* qkv_w, p(e, b.qkv_w));
    ZDP_ASSIGN_OR_RETURN(void* ln1_w, p(e, b.ln1_w));
    const Param order[] = {b.fc_proj_w, b.fc_proj_b, b.fc_w, b.fc_b, b.ln2_w, b.ln2_b,
                           b.proj_w, b.proj_b, b.qkv_w, b.qkv_b, b.ln1_w, b.ln1_b};
    std::vector<void*> gv;
    for (Param q : order) {
      ZDP_ASSIGN_OR_RETURN(void* v, g(e, q));
      gv.push_back(v);
    }
    // fc proj's backward through the GELU: d(fc_pre) and the fc bias's gradient (gv[3]) at once.
    ops_->region(KernelRegion::kFcProjBwd);
    ZDP_RETURN_IF_ERROR(ops_->linear_backward_gelu(b.fc_act.data(), fp_w, dx_.data(), b.fc_pre.data(), dfc_.data(), gv[3],
                                                   gv[0], gv[1], n, 4 * C_, C_));
    ops_->region(KernelRegion::kFcBwd);
    ZDP_RETURN_IF_ERROR(ops_->linear_backward(b.ln2.data(), fc_w, dfc_.data(), dln_.data(), OutputMode::kOverwrite, gv[2], nullptr, n, C_, 4 * C_));
    ops_->region(KernelRegion::kLayernormBwd);
    ZDP_RETURN_IF_ERROR(ops_->layernorm_backward({n, C_, dt, dln_.data(), b.x_mid.data(), ln2_w, b.ln2_mean.as<float>(), b.ln2_rstd.as<float>(),
                                                 dx_.data(), OutputMode::kAccumulate, gv[4], gv[5]}));
    ops_->region(KernelRegion::kProjBwd);
    ZDP_RETURN_IF_ERROR(ops_->linear_backward(b.attn_y.data(), proj_w, dx_.data(), dattn_.data(), OutputMode::kOverwrite, gv[6], gv[7], n, C_, C_));
    ZDP_ASSIGN_OR_RETURN(const AttentionSaved saved, attention_saved(b, n));
    ZDP_RETURN_IF_ERROR(attention_backward(*ops_, shape(n), b.qkv.data(), saved, b.attn_y.data(), dattn_.data(),
                                           saved.fused ? nullptr : dprobs_.data(), dqkv_.data()));
    ops_->region(KernelRegion::kQkvBwd);
    ZDP_RETURN_IF_ERROR(ops_->linear_backward(b.ln1.data(), qkv_w, dqkv_.data(), dln_.data(), OutputMode::kOverwrite, gv[8], gv[9], n, C_, 3 * C_));
    ops_->region(KernelRegion::kLayernormBwd);
    ZDP_RETURN_IF_ERROR(ops_->layernorm_backward({n, C_, dt, dln_.data(), b.x_in.data(), ln1_w, b.ln1_mean.as<float>(), b.ln1_rstd.as<float>(),
                                                 dx_.data(), OutputMode::kAccumulate, gv[10], gv[11]}));
    // The engine's gradient hand-off (accumulation, folds, reductions issued) is timed as
    // a region of its own, so that the planner's engine rows have a measurement.
    ops_->region(KernelRegion::kGradHandoff);
    for (Param q : order) ZDP_RETURN_IF_ERROR(e.grad_ready(q));
    ops_->end_region();
    return Status::Ok();
  }

  AttentionShape shape(int64_t n) const { return {n / T_, T_, H_, C_ / H_}; }

  // Where block b's attention keeps what its backward needs for `n` tokens. A fused model
  // whose smaller batch (an evaluation's last) cuDNN refuses takes the probabilities'
  // buffers then, outside activation_bytes(); Ops has warned.
  StatusOr<AttentionSaved> attention_saved(Block& b, int64_t n) {
    if (!fused_) return AttentionSaved{false, b.probs.data(), nullptr};
    ZDP_ASSIGN_OR_RETURN(const bool fused, ops_->use_fused_attention(fused_shape(shape(n), dtype_)));
    if (fused) return AttentionSaved{true, nullptr, b.attn_stats.as<float>()};
    const int64_t elements = AttentionSaved::probs_elements({B_, T_, H_, C_ / H_});
    if (!b.probs.data()) {
      ZDP_ASSIGN_OR_RETURN(b.probs, ops_->alloc(elements, dtype_));
    }
    if (!dprobs_.data()) {
      ZDP_ASSIGN_OR_RETURN(dprobs_, ops_->alloc(elements, dtype_));
    }
    return AttentionSaved{false, b.probs.data(), nullptr};
  }

  // The first `n` ids (tokens or targets) are in [0, V): kInvalidArgument naming the first
  // that is not, and its sample.
  Status check_ids(const std::vector<int32_t>& ids, int64_t n, const char* what) const {
    if (static_cast<int64_t>(ids.size()) < n) {
      return Status(StatusCode::kInvalidArgument, std::string("gpt: the batch has ") + std::to_string(ids.size()) + " " +
                                                      what + "s, fewer than its " + std::to_string(n));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (ids[static_cast<size_t>(i)] < 0 || ids[static_cast<size_t>(i)] >= V_) {
        return Status(StatusCode::kInvalidArgument,
                      std::string("gpt: ") + what + " " + std::to_string(ids[static_cast<size_t>(i)]) + " of sample " +
                          std::to_string(i / T_) + " (position " + std::to_string(i % T_) + ") is outside [0, " +
                          std::to_string(V_) + ") (model.vocab_size)");
      }
    }
    return Status::Ok();
  }

  // Training with `loss` (returns 0; the loss goes there), else evaluation (returns the
  // mean loss, read back).
  StatusOr<double> run(Engine& e, const Batch& batch, const LossSink* loss) {
    const bool train = loss != nullptr;
    if (batch.count > B_) return Status(StatusCode::kInternal, "gpt: batch larger than micro_batch");
    const int64_t n = batch.count * T_;
    const DType dt = ops_->dtype();
    // The GPU's embedding and cross-entropy index with these unchecked (the CPU twins
    // check): a batch that did not come from the trainer's sources, which check every
    // sample, is checked here, on the host, before it is uploaded.
    ZDP_RETURN_IF_ERROR(check_ids(batch.tokens, n, "token"));
    ZDP_RETURN_IF_ERROR(check_ids(batch.labels, n, "target"));
    ZDP_RETURN_IF_ERROR(ops_->upload(tokens_.data(), batch.tokens.data(), static_cast<size_t>(n) * 4));
    ZDP_RETURN_IF_ERROR(ops_->upload(targets_.data(), batch.labels.data(), static_cast<size_t>(n) * 4));
    {
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope s, e.layer(0, Engine::Pass::kForward));
      ZDP_ASSIGN_OR_RETURN(void* wte, p(e, wte_));
      ZDP_ASSIGN_OR_RETURN(void* wpe, p(e, wpe_));
      ops_->region(KernelRegion::kEmbeddingFwd);
      ZDP_RETURN_IF_ERROR(ops_->embedding({batch.count, T_, C_, V_, dt, tokens_.as<int32_t>(), wte, wpe, blocks_[0].x_in.data()}));
      ops_->end_region();
    }
    for (int l = 0; l < L_; ++l) {
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope s, e.layer(1 + l, Engine::Pass::kForward));
      void* x_next = l + 1 < L_ ? blocks_[static_cast<size_t>(l + 1)].x_in.data() : x_out_.data();
      ZDP_RETURN_IF_ERROR(forward_block(e, blocks_[static_cast<size_t>(l)], x_next, n));
    }
    // The head and the final norm stay gathered through the loss and their backward.
    ZDP_ASSIGN_OR_RETURN(Engine::LayerScope head, e.layer(L_ + 1, train ? Engine::Pass::kBackward : Engine::Pass::kForward));
    ZDP_ASSIGN_OR_RETURN(Engine::LayerScope embed, e.layer(0, Engine::Pass::kForward));
    ZDP_ASSIGN_OR_RETURN(void* lnf_w, p(e, lnf_w_));
    ZDP_ASSIGN_OR_RETURN(void* lnf_b, p(e, lnf_b_));
    ZDP_ASSIGN_OR_RETURN(void* wte, p(e, wte_));
    ops_->region(KernelRegion::kLayernormFwd);
    ZDP_RETURN_IF_ERROR(ops_->layernorm({n, C_, dt, x_out_.data(), lnf_w, lnf_b, lnf_.data(), lnf_mean_.as<float>(), lnf_rstd_.as<float>()}));
    ops_->region(KernelRegion::kLmHeadFwd);
    ZDP_RETURN_IF_ERROR(ops_->linear(lnf_.data(), wte, nullptr, logits_.data(), n, C_, V_));
    const float grad_scale = static_cast<float>(e.loss_scale() / static_cast<double>(n));
    ops_->region(KernelRegion::kCrossEntropy);
    ZDP_RETURN_IF_ERROR(ops_->cross_entropy({n, V_, dt, logits_.data(), targets_.as<int32_t>(), losses_.as<float>(),
                                            train ? logits_.data() : nullptr, grad_scale}));
    ops_->end_region();
    if (!train) return ops_->mean_loss(losses_.as<float>(), n);
    ZDP_RETURN_IF_ERROR(ops_->loss_sum(losses_.as<float>(), n, *loss));
    ZDP_RETURN_IF_ERROR(e.mark(TimelineEvent::Kind::kBackward));  // profiling: forward ends here

    // Backward: the head's share of the tied embedding's gradient waits in fp32 for the
    // embedding's own (gradient staging holds one layer group at a time).
    ops_->region(KernelRegion::kLmHeadBwd);
    ZDP_RETURN_IF_ERROR(ops_->weight_grad(lnf_.data(), logits_.data(), dwte_head_.data(), DType::kF32, n, C_, V_));
    ZDP_RETURN_IF_ERROR(ops_->linear_backward(lnf_.data(), wte, logits_.data(), dln_.data(), OutputMode::kOverwrite,
                                             nullptr, nullptr, n, C_, V_));
    ZDP_ASSIGN_OR_RETURN(void* g_lnf_w, g(e, lnf_w_));
    ZDP_ASSIGN_OR_RETURN(void* g_lnf_b, g(e, lnf_b_));
    ops_->region(KernelRegion::kLayernormBwd);
    ZDP_RETURN_IF_ERROR(ops_->layernorm_backward({n, C_, dt, dln_.data(), x_out_.data(), lnf_w, lnf_mean_.as<float>(),
                                                 lnf_rstd_.as<float>(), dx_.data(), OutputMode::kOverwrite, g_lnf_w, g_lnf_b}));
    ops_->region(KernelRegion::kGradHandoff);
    ZDP_RETURN_IF_ERROR(e.grad_ready(lnf_w_));
    ZDP_RETURN_IF_ERROR(e.grad_ready(lnf_b_));
    ops_->end_region();
    head = Engine::LayerScope();
    embed = Engine::LayerScope();
    for (int l = L_ - 1; l >= 0; --l) {
      ZDP_ASSIGN_OR_RETURN(Engine::LayerScope s, e.layer(1 + l, Engine::Pass::kBackward));
      ZDP_RETURN_IF_ERROR(backward_block(e, blocks_[static_cast<size_t>(l)], n));
    }
    ZDP_ASSIGN_OR_RETURN(Engine::LayerScope s, e.layer(0, Engine::Pass::kBackward));
    std::vector<int32_t> offsets, order;
    ZDP_RETURN_IF_ERROR(kernels::build_token_index(batch.tokens.data(), n, V_, &offsets, &order));
    ZDP_RETURN_IF_ERROR(ops_->upload(offsets_.data(), offsets.data(), offsets.size() * 4));
    ZDP_RETURN_IF_ERROR(ops_->upload(order_.data(), order.data(), order.size() * 4));
    ZDP_ASSIGN_OR_RETURN(void* g_wte, g(e, wte_));
    ZDP_ASSIGN_OR_RETURN(void* g_wpe, g(e, wpe_));
    ops_->region(KernelRegion::kEmbeddingBwd);
    ZDP_RETURN_IF_ERROR(ops_->embedding_backward({batch.count, T_, C_, V_, dt, dx_.data(), offsets_.as<int32_t>(),
                                                 order_.as<int32_t>(), dwte_head_.as<float>(), g_wte, g_wpe}));
    ops_->region(KernelRegion::kGradHandoff);
    ZDP_RETURN_IF_ERROR(e.grad_ready(wte_));
    ZDP_RETURN_IF_ERROR(e.grad_ready(wpe_));
    ops_->end_region();
    return 0.0;
  }

  // int64: their products size buffers (V x C, H x T, (V + 1) x 4 bytes), and in int they
  // overflowed for shapes the config allows (V x C past 2^31: a vocabulary of 2^20 at
  // d_model 4096).
  int64_t L_, C_, H_, V_, T_;
  float std_;
  int64_t B_;
  AttentionImpl attention_;
  bool fused_ = false;  // attention of a full micro-batch runs fused (decided in allocate())
  std::vector<Block> blocks_;
  Param wte_, wpe_, lnf_w_, lnf_b_;
  DeviceBuffer x_out_, lnf_, lnf_mean_, lnf_rstd_, logits_, losses_, tokens_, targets_, offsets_, order_;
  DeviceBuffer dx_, dln_, dattn_, dqkv_, dfc_, dprobs_, dwte_head_;
};

}  // namespace

bool plans_fused_attention(const ModelConfig& m) {
  return m.attention == AttentionImpl::kFused || (m.attention == AttentionImpl::kAuto && m.dtype != DType::kF32);
}

StatusOr<std::unique_ptr<Model>> make_gpt(const ModelConfig& config, int64_t micro_batch, Ops* ops) {
  if (config.d_model % config.n_heads != 0) {
    return Status(StatusCode::kInvalidArgument, "gpt: model.d_model (" + std::to_string(config.d_model) +
                                                    ") is not divisible by model.n_heads (" + std::to_string(config.n_heads) + ")");
  }
  return std::unique_ptr<Model>(new Gpt(config, micro_batch, ops));
}

}  // namespace zdp::trainer

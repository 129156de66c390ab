// LossHistory (loss_history.h).
#include "trainer/loop/loss_history.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "runtime/internal/json_checked.h"

namespace zdp::trainer {
namespace {

// JSON has no NaN or infinity: a non-finite loss (an fp16 overflow) is stored as null.
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
bool number_or_null(const nlohmann::json& j) { return j.is_number() || j.is_null(); }
double value(const nlohmann::json& j) { return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>(); }

}  // namespace

void LossHistory::add_step(int64_t step, double loss, double tokens_per_s) {
  pending_.step = step;
  pending_.loss += loss;
  pending_.tokens_per_s += tokens_per_s;
  if (++pending_n_ < stride_) return;
  const double n = static_cast<double>(pending_n_);
  points_.push_back({step, pending_.loss / n, pending_.tokens_per_s / n});
  pending_ = {0, 0, 0};
  pending_n_ = 0;
  if (points_.size() > kMaxPoints) halve();
}

void LossHistory::add_eval(int64_t step, double loss) {
  evals_.emplace_back(step, loss);
  if (evals_.size() > kMaxPoints) {  // keep every other evaluation and the last
    std::vector<std::pair<int64_t, double>> kept;
    for (size_t i = 0; i < evals_.size(); ++i) {
      if (i % 2 == 1 || i + 1 == evals_.size()) kept.push_back(evals_[i]);
    }
    evals_ = std::move(kept);
  }
}

void LossHistory::halve() {
  std::vector<Point> merged;
  for (size_t i = 0; i + 1 < points_.size(); i += 2) {
    const Point& a = points_[i];
    const Point& b = points_[i + 1];
    merged.push_back({b.step, (a.loss + b.loss) / 2, (a.tokens_per_s + b.tokens_per_s) / 2});
  }
  if (points_.size() % 2 == 1) merged.push_back(points_.back());
  points_ = std::move(merged);
  stride_ *= 2;
}

std::vector<LossHistory::Point> LossHistory::points() const {
  std::vector<Point> out = points_;
  if (pending_n_ > 0) {
    const double n = static_cast<double>(pending_n_);
    out.push_back({pending_.step, pending_.loss / n, pending_.tokens_per_s / n});
  }
  return out;
}

nlohmann::json LossHistory::to_json() const {
  nlohmann::json steps = nlohmann::json::array(), losses = nlohmann::json::array(), rates = nlohmann::json::array();
  for (const Point& p : points()) {
    steps.push_back(p.step);
    losses.push_back(number(p.loss));
    rates.push_back(number(p.tokens_per_s));
  }
  nlohmann::json eval_steps = nlohmann::json::array(), eval_losses = nlohmann::json::array();
  for (const auto& [step, loss] : evals_) {
    eval_steps.push_back(step);
    eval_losses.push_back(number(loss));
  }
  // "pending": how many steps the last point holds of a group not yet complete (0: none),
  // so that a resumed run completes that group instead of starting a new one.
  return {{"stride", stride_},         {"step", steps},          {"loss", losses}, {"tokens_per_s", rates},
          {"eval_step", eval_steps}, {"eval_loss", eval_losses}, {"pending", pending_n_}};
}

StatusOr<LossHistory> LossHistory::from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, "loss history: " + what);
  };
  if (!j.is_object()) return bad("not a JSON object");
  for (const char* key : {"stride", "step", "loss", "tokens_per_s", "eval_step", "eval_loss"}) {
    if (!j.contains(key)) return bad(std::string("'") + key + "' is missing");
  }
  // The history comes from a checkpoint a user may have edited: its integers are bounded
  // before they are used (a stride near 2^63 would overflow when halve() doubles it).
  StatusOr<int64_t> stride = json_checked::integer(&j.at("stride"), "'stride'", 1, kMaxStride);
  if (!stride.ok()) return bad(stride.status().message());
  const nlohmann::json &steps = j.at("step"), &losses = j.at("loss"), &rates = j.at("tokens_per_s");
  const nlohmann::json &eval_steps = j.at("eval_step"), &eval_losses = j.at("eval_loss");
  for (const nlohmann::json* a : {&steps, &losses, &rates, &eval_steps, &eval_losses}) {
    if (!a->is_array() || a->size() > kMaxPoints + 1) return bad("an array is missing or longer than " + std::to_string(kMaxPoints + 1));
  }
  if (losses.size() != steps.size() || rates.size() != steps.size() || eval_losses.size() != eval_steps.size()) {
    return bad("arrays of different lengths");
  }
  LossHistory h;
  h.stride_ = *stride;
  int64_t last = -1;
  for (size_t i = 0; i < steps.size(); ++i) {
    StatusOr<int64_t> step = json_checked::integer(&steps[i], "step of point " + std::to_string(i), 0, kMaxStep);
    if (!step.ok()) return bad(step.status().message());
    if (!number_or_null(losses[i]) || !number_or_null(rates[i])) return bad("point " + std::to_string(i) + " is not numeric");
    if (*step <= last) return bad("steps out of order at point " + std::to_string(i));
    last = *step;
    h.points_.push_back({*step, value(losses[i]), value(rates[i])});
  }
  // Optional (histories written before it have none): the last point as the sums of its
  // group, pending_n_ steps of stride_.
  if (j.contains("pending")) {
    StatusOr<int64_t> pending = json_checked::integer(&j.at("pending"), "'pending'", 0, *stride - 1);
    if (!pending.ok()) return bad(pending.status().message());
    if (*pending > 0) {
      if (h.points_.empty()) return bad("'pending' is " + std::to_string(*pending) + " but there are no points");
      const Point p = h.points_.back();
      h.points_.pop_back();
      const double n = static_cast<double>(*pending);
      h.pending_ = {p.step, p.loss * n, p.tokens_per_s * n};
      h.pending_n_ = *pending;
    }
  }
  last = -1;
  for (size_t i = 0; i < eval_steps.size(); ++i) {
    StatusOr<int64_t> step = json_checked::integer(&eval_steps[i], "step of evaluation " + std::to_string(i), 0, kMaxStep);
    if (!step.ok()) return bad(step.status().message());
    if (!number_or_null(eval_losses[i])) return bad("evaluation " + std::to_string(i) + " is not numeric");
    if (*step < last) return bad("evaluation steps out of order at evaluation " + std::to_string(i));
    last = *step;
    h.evals_.emplace_back(*step, value(eval_losses[i]));
  }
  return h;
}

int64_t LossHistory::last_step() const {
  int64_t last = pending_n_ > 0 ? pending_.step : points_.empty() ? -1 : points_.back().step;
  if (!evals_.empty()) last = std::max(last, evals_.back().first);
  return last;
}

}  // namespace zdp::trainer

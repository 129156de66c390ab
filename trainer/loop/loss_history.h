// A run's curve for loss.svg: per step the train loss and tokens/s, and the held-out loss
// at each evaluation. It is carried through checkpoints (in the trainer JSON), so that a
// resumed run's curve continues the saved one, and written into train_summary.json. It
// stays bounded: past kMaxPoints points, neighbouring points merge in pairs (their mean,
// at the later step) and later steps are merged just as coarsely, so a long run keeps its
// shape in a few hundred KiB.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "zdp/status.h"

namespace zdp::trainer {

class LossHistory {
 public:
  static constexpr size_t kMaxPoints = 4096;
  // Bounds on what from_json() takes: a trillion steps a point, 2^62 steps.
  static constexpr int64_t kMaxStride = int64_t{1} << 40;
  static constexpr int64_t kMaxStep = int64_t{1} << 62;

  void add_step(int64_t step, double loss, double tokens_per_s);
  void add_eval(int64_t step, double loss);

  // The points, in step order (a partly merged last group included).
  struct Point {
    int64_t step;
    double loss, tokens_per_s;
  };
  std::vector<Point> points() const;
  const std::vector<std::pair<int64_t, double>>& evals() const { return evals_; }
  int64_t stride() const { return stride_; }  // steps per point

  // {"stride": s, "step": [...], "loss": [...], "tokens_per_s": [...], "eval_step": [...], "eval_loss": [...],
  //  "pending": n}: n > 0 when the last point is the mean of n < s steps of a group not yet
  //  complete (from_json restores it as that group; a history without "pending" reads as 0).
  nlohmann::json to_json() const;
  // kInvalidArgument naming the field when `j` is not such an object (arrays of different
  // lengths, non-numbers, more than kMaxPoints points, steps out of order or outside
  // [0, kMaxStep], a stride outside [1, kMaxStride]).
  static StatusOr<LossHistory> from_json(const nlohmann::json& j);
  // The latest step it holds (a point's or an evaluation's), -1 when empty.
  int64_t last_step() const;

 private:
  void halve();
  std::vector<Point> points_;
  std::vector<std::pair<int64_t, double>> evals_;
  int64_t stride_ = 1;
  Point pending_{0, 0, 0};  // the sums of a group not yet complete
  int64_t pending_n_ = 0;
};

}  // namespace zdp::trainer

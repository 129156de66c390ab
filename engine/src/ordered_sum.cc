// OrderedSum: the operations of the canonical pairwise tree over micro-batches.
#include "engine/src/ordered_sum.h"

#include <cstddef>

namespace zdp {

int OrderedSum::max_depth(int64_t leaves) {
  int depth = 1;
  while ((int64_t{1} << depth) <= leaves) ++depth;
  return depth;
}

std::vector<OrderedSum::Op> OrderedSum::push(int count) {
  std::vector<Op> ops;
  for (int k = 0; k < count; ++k, ++pushed_) {
    const int top = static_cast<int>(levels_.size()) - 1;
    if (top >= 0 && levels_[static_cast<std::size_t>(top)] == 0) {
      ops.push_back(Op{Op::Kind::kMergeLeaf, top, 0, k});
      levels_[static_cast<std::size_t>(top)] = 1;
    } else {
      levels_.push_back(0);
      ops.push_back(Op{Op::Kind::kPushLeaf, top + 1, 0, k});
    }
    while (levels_.size() >= 2 && levels_[levels_.size() - 1] == levels_[levels_.size() - 2]) {
      const int src = static_cast<int>(levels_.size()) - 1;
      ops.push_back(Op{Op::Kind::kMerge, src - 1, src, 0});
      levels_.pop_back();
      ++levels_.back();
    }
  }
  if (pushed_ == leaves_) {
    for (int i = static_cast<int>(levels_.size()) - 2; i >= 0; --i) ops.push_back(Op{Op::Kind::kMerge, i, i + 1, 0});
    levels_.assign(levels_.empty() ? 0 : 1, 0);
  }
  return ops;
}

}  // namespace zdp

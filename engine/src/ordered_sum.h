// Deterministic mode's canonical sum of the M = world x accum_steps micro-batch gradients
// of a step (docs/design.md "Deterministic mode"): leaves in global micro-batch order
// (g = micro x world + rank), combined by the binary-counter pairwise tree: leaf g is
// pushed as an entry of level 0, and while the two top entries have the same level they
// are added into one of the next level; after the last leaf the entries left are added
// from the top down. The tree depends on M alone, so every world size, stage and bucket
// cut that feeds it the same leaves in the same order gets the same bits (addition of
// two floats is commutative, so each node's value is fixed by its two children).
//
// Pure arithmetic: it says which operations to do on a stack of fp32 partials; the
// GradReducer applies them to every bucket's owned range.
#pragma once

#include <cstdint>
#include <vector>

namespace zdp {

class OrderedSum {
 public:
  struct Op {
    enum class Kind {
      kPushLeaf,   // entry[dst] = leaf (cast to fp32)
      kMergeLeaf,  // entry[dst] = leaf + entry[dst]
      kMerge,      // entry[dst] = entry[src] + entry[dst]
    };
    Kind kind = Kind::kPushLeaf;
    int dst = 0;
    int src = 0;  // kMerge only
    int leaf = 0; // kPushLeaf / kMergeLeaf: which of the pushed leaves (0-based in push())
  };

  explicit OrderedSum(int64_t leaves) : leaves_(leaves) {}
  // Entries the stack ever holds for `leaves` leaves: floor(log2(leaves)) + 1.
  static int max_depth(int64_t leaves);

  // A new step: no leaves pushed.
  void reset() { levels_.clear(); pushed_ = 0; }
  // The operations for the next `count` leaves, in order (op.leaf counts from 0 within
  // this call), followed, when they are the last, by the final fold into entry 0.
  std::vector<Op> push(int count);
  int64_t pushed() const { return pushed_; }
  bool complete() const { return pushed_ == leaves_; }

 private:
  int64_t leaves_;
  int64_t pushed_ = 0;
  std::vector<int> levels_;  // the stack: level of each entry, bottom first
};

}  // namespace zdp

// Element-wise reductions of host buffers for the Gloo backend, per dtype and op.
// fp16 and bf16 are reduced by converting each element to fp32, combining, and rounding
// back (round-to-nearest-even): one rounding per combine, as on the GPU.
#pragma once

#include <cstddef>

#include "zdp/comm.h"

namespace zdp {

// out[i] = a[i] (op) b[i] for n elements; out may alias a or b. Gloo's signature.
using HostReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// The combine function for `op` (kAvg combines as a sum; finish with host_scale).
HostReduceFn host_reduce_fn(DType dtype, ReduceOp op);

// buf[i] *= factor, for the 1/K of an average. REQUIRES: a floating dtype.
void host_scale(void* buf, size_t n, DType dtype, float factor);

}  // namespace zdp

// Element types of zdp's buffers and collectives, their sizes, and the byte and shape
// formats of every message: the vocabulary the kernels, the communicators and the engine share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zdp {

enum class DType : uint8_t { kF32 = 0, kF16, kBF16, kI64 };
size_t dtype_size(DType dtype);
const char* to_string(DType dtype);  // "fp32", "fp16", "bf16", "int64"

// "512.0 KiB", "12.50 MiB": the byte format used in every message.
std::string format_bytes(int64_t bytes);
// "[768, 3072]", "[]" for a scalar: the shape format used in every message.
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace zdp

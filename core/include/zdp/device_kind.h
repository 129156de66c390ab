// Which kind of device a rank computes on. The device interface itself (memory, streams,
// events) is zdp/device.h; the kernels and the optimizer need only this name.
#pragma once

namespace zdp {

enum class DeviceKind : int { kCpu = 0, kCuda = 1 };
const char* to_string(DeviceKind kind);  // "cpu", "cuda"

}  // namespace zdp

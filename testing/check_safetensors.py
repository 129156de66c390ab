#!/usr/bin/env python3
"""Opens a zdp checkpoint and dp-ckpt exports with the real `safetensors` Python package
and compares them with the engine's master weights (raw little-endian fp32 files
EXPECTED/<name>.f32 written by the test from Engine::gather_master).

usage: check_safetensors.py STEP_DIR EXPECTED_DIR FP16_EXPORT BF16_EXPORT
Exit 0 when everything matches; an AssertionError names the tensor otherwise."""
import json
import os
import struct
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file


def bits(a, kind):
    return np.ascontiguousarray(a).reshape(-1).view(kind)


def bf16_round_to_nearest_even(x):
    """fp32 -> bf16 bits, ties to even (finite values), computed independently of zdp."""
    u = bits(x, np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def raw_tensor(path, name):
    """A tensor's bytes found through the file's own header (numpy has no bfloat16)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        begin, end = header[name]["data_offsets"]
        f.seek(8 + n + begin)
        return f.read(end - begin)


def main():
    step_dir, expected_dir, fp16_path, bf16_path = sys.argv[1:5]
    expected = {f[: -len(".f32")]: np.fromfile(os.path.join(expected_dir, f), dtype="<f4")
                for f in os.listdir(expected_dir) if f.endswith(".f32")}
    assert expected, "no expected tensors in " + expected_dir

    model = load_file(os.path.join(step_dir, "model.safetensors"))
    assert sorted(model) == sorted(expected), (sorted(model), sorted(expected))
    for name, want in expected.items():
        got = model[name]
        assert got.dtype == np.float32, (name, got.dtype)
        assert got.size == want.size, (name, got.shape, want.size)
        assert np.array_equal(bits(got, np.uint32), bits(want, np.uint32)), "model.safetensors: " + name

    optimizer = load_file(os.path.join(step_dir, "optimizer.safetensors"))
    want_names = sorted([n + ".exp_avg" for n in expected] + [n + ".exp_avg_sq" for n in expected])
    assert sorted(optimizer) == want_names, (sorted(optimizer), want_names)
    for name in expected:
        assert optimizer[name + ".exp_avg"].shape == model[name].shape, name
        assert (optimizer[name + ".exp_avg_sq"] >= 0).all(), name + ": a second moment below 0"

    half = load_file(fp16_path)
    with safe_open(fp16_path, framework="numpy") as f:
        assert f.metadata().get("format") == "pt", f.metadata()
    for name, want in expected.items():
        assert half[name].dtype == np.float16, (name, half[name].dtype)
        assert half[name].shape == model[name].shape, name
        # numpy's float32 -> float16 conversion rounds to nearest even.
        assert np.array_equal(bits(half[name], np.uint16), bits(want.astype(np.float16), np.uint16)), "fp16: " + name

    with safe_open(bf16_path, framework="numpy") as f:
        assert sorted(f.keys()) == sorted(expected), sorted(f.keys())
        for name, want in expected.items():
            s = f.get_slice(name)
            assert s.get_dtype() == "BF16", (name, s.get_dtype())
            assert list(s.get_shape()) == list(model[name].shape), name
            got = np.frombuffer(raw_tensor(bf16_path, name), dtype="<u2")
            assert np.array_equal(got, bf16_round_to_nearest_even(want)), "bf16: " + name

    print("safetensors %s: %d tensors of %s and its fp16/bf16 exports match the engine's masters"
          % (__import__("safetensors").__version__, len(expected), step_dir))


if __name__ == "__main__":
    main()

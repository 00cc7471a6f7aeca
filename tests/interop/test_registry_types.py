"""The zarr-extensions registry's data types beyond the core (int2, uint2, uint4, the float8,
float6 and float4 types, complex_float16/32/64, complex_bfloat16 and a complex type of each
small float): their fill values in every form the registry allows, through a real mount of
arrays with no chunks (so `data` is the fill value throughout); the high bits of sub-byte
floats ignored; fill values a type cannot represent and types zarrfs does not know, refused
by name.

The oracle is ml_dtypes (the registry's reference implementation of these types) and the
registry's own words: float8_e4m3's "NaN" is 0x7c, float8_e5m2's 0x7e, float8_e3m4's 0x78,
the fnuz types' 0x80, float8_e8m0fnu's 0xff. zarrs' arrays of the types it writes are read and
written in test_zarrs_corpus.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tests.helpers.mounting import ZARRFS, mounted

SHAPE = [2, 3]
NAN, INF = math.nan, math.inf


def _pair(part: Any, real: float, imag: float) -> bytes:
    return np.array([real, imag], dtype=part).tobytes()


# (data type, fill value as JSON, the element's bits as the flat view holds them)
CASES: list[tuple[str, Any, bytes]] = [
    ("float8_e4m3", "NaN", b"\x7c"),
    ("float8_e4m3", "-Infinity", np.array(-INF, ml_dtypes.float8_e4m3).tobytes()),
    ("float8_e4m3", "0x01", b"\x01"),
    ("float8_e4m3", -0.0, b"\x80"),
    ("float8_e4m3", 0.25, np.array(0.25, ml_dtypes.float8_e4m3).tobytes()),
    ("float8_e5m2", "NaN", b"\x7e"),
    ("float8_e5m2", "Infinity", np.array(INF, ml_dtypes.float8_e5m2).tobytes()),
    ("float8_e5m2", -1.5, np.array(-1.5, ml_dtypes.float8_e5m2).tobytes()),
    ("float8_e5m2", "0x7f", b"\x7f"),  # a NaN with another payload
    ("int2", -2, np.int8(-2).tobytes()),
    ("int2", 1, b"\x01"),
    ("uint2", 3, b"\x03"),
    ("uint4", 15, b"\x0f"),
    ("complex_float16", ["0x3c00", "Infinity"], _pair(np.float16, 1.0, INF)),
    ("complex_float16", [-0.5, "NaN"], _pair(np.float16, -0.5, NAN)),
    ("complex_float32", [1.5, "-Infinity"], np.complex64(complex(1.5, -INF)).tobytes()),
    ("complex_float64", ["0x7ff8000000000001", -0.0],
     (0x7FF8000000000001).to_bytes(8, "little") + np.float64(-0.0).tobytes()),
    ("complex_bfloat16", ["NaN", 2.5], _pair(ml_dtypes.bfloat16, NAN, 2.5)),
    ("complex_float8_e4m3", [0.5, "-Infinity"], _pair(ml_dtypes.float8_e4m3, 0.5, -INF)),
    ("complex_float8_e5m2", ["0x7e", 3.0], b"\x7e" + np.array(3.0, ml_dtypes.float8_e5m2).tobytes()),
    ("float8_e3m4", "NaN", b"\x78"),
    ("float8_e3m4", "-Infinity", np.array(-INF, ml_dtypes.float8_e3m4).tobytes()),
    ("float8_e4m3fnuz", "NaN", b"\x80"),
    ("float8_e4m3b11fnuz", -9.0, np.array(-9.0, ml_dtypes.float8_e4m3b11fnuz).tobytes()),
    ("float8_e5m2fnuz", "NaN", b"\x80"),
    ("float8_e8m0fnu", "NaN", b"\xff"),
    ("float8_e8m0fnu", 0.5, np.array(0.5, ml_dtypes.float8_e8m0fnu).tobytes()),
    ("float8_e4m3fn", "NaN", b"\x7f"),  # (TensorStore's type, not the registry's)
    ("float6_e2m3fn", -1.25, np.array(-1.25, ml_dtypes.float6_e2m3fn).tobytes()),
    ("float6_e3m2fn", "0xff", b"\x3f"),  # (the high bits are ignored)
    ("float4_e2m1fn", -6.0, np.array(-6.0, ml_dtypes.float4_e2m1fn).tobytes()),
    ("complex_float4_e2m1fn", [0.5, "0x0f"], np.array(0.5, ml_dtypes.float4_e2m1fn).tobytes() + b"\x0f"),
    ("complex_float8_e4m3fnuz", ["NaN", -0.25],
     b"\x80" + np.array(-0.25, ml_dtypes.float8_e4m3fnuz).tobytes()),
    ("complex_float8_e8m0fnu", [1.0, 2.0], _pair(ml_dtypes.float8_e8m0fnu, 1.0, 2.0)),
]


def _document(data_type: Any, fill_value: Any) -> dict[str, Any]:
    return {"zarr_format": 3, "node_type": "array", "shape": SHAPE, "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": SHAPE}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": fill_value,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.mkdir(parents=True)
    (path / "zarr.json").write_text(json.dumps(doc))


def test_fill_values_in_every_registry_form(tmp_path: Path) -> None:
    root = tmp_path / "src"
    _write(root, {"zarr_format": 3, "node_type": "group"})
    for i, (data_type, fill, _) in enumerate(CASES):
        # The object form without configuration names a type as well as the bare name does.
        _write(root / f"a{i}", _document(data_type if i % 2 else {"name": data_type}, fill))
    with mounted(root, tmp_path / "mnt", ("ro",)) as mount:
        for i, (data_type, fill, bits) in enumerate(CASES):
            data = mount.path / f"a{i}" / "data"
            assert data.read_bytes() == bits * math.prod(SHAPE), (data_type, fill)
            # The fill value read back is the same bits (the registry's form of it, not the text given).
            shown = json.loads(os.getxattr(data, "user.zarr.fill_value"))
            _write(root / f"b{i}", _document(data_type, shown))
            assert (mount.path / f"b{i}" / "data").read_bytes() == bits * math.prod(SHAPE), (data_type, shown)


@pytest.mark.parametrize(("data_type", "fill", "message"), [
    ("float8_e4m3", None, "expected a number, NaN, Infinity or 0x bits, got None"),
    ("float3_e1m1", 0, "unknown or unsupported data type 'float3_e1m1'"),
    ({"name": "complex_int4"}, [0, 0], "unknown or unsupported data type 'complex_int4'"),
    ("float8_e4m3fnuz", "Infinity", "'Infinity' has no representation in float8_e4m3fnuz"),
    ("float8_e8m0fnu", 0, "0 has no representation in float8_e8m0fnu"),  # (no zero)
    ("complex_float4_e2m1fn", [0, "NaN"], "'NaN' has no representation in float4_e2m1fn"),
    ("int2", 2, "2 is outside the range of int2"),
    ("uint4", -1, "-1 is outside the range of uint4"),
    ("float8_e5m2", "0x7e00", "'0x7e00' needs 2 digits"),
    ("complex_bfloat16", 0.0, "expected [real, imaginary] for complex_bfloat16"),
    ({"name": "float8_e4m3", "configuration": {"x": 1}}, 0, "float8_e4m3 takes no configuration"),
])
def test_refused_types_and_fill_values_are_named(tmp_path: Path, data_type: Any, fill: Any,
                                                 message: str) -> None:
    _write(tmp_path / "a", _document(data_type, fill))
    (tmp_path / "mnt").mkdir()
    result = subprocess.run([ZARRFS, "mount", "-f", str(tmp_path / "a"), str(tmp_path / "mnt")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr + result.stdout


@pytest.mark.parametrize(("data_type", "part"), [
    ("complex_float16", np.float16), ("complex_bfloat16", ml_dtypes.bfloat16),
    ("complex_float8_e4m3", ml_dtypes.float8_e4m3), ("float8_e5m2", ml_dtypes.float8_e5m2),
])
def test_big_endian_chunks_swap_each_part(tmp_path: Path, data_type: str, part: Any) -> None:
    """`data` stays little-endian; the chunk holds each part (real, imaginary) big-endian, and
    1-byte parts as they are (the registry: "endian" has no effect on them)."""
    doc = _document(data_type, [0, 0] if data_type.startswith("complex") else 0)
    doc["codecs"] = [{"name": "bytes", "configuration": {"endian": "big"}}]
    _write(tmp_path / "a", doc)
    parts = np.arange(1, 13 if data_type.startswith("complex") else 7, dtype=np.float32).astype(part)
    with mounted(tmp_path / "a", tmp_path / "mnt") as mount:
        mount.data.write_bytes(parts.tobytes())
    swapped = parts.view(f"u{parts.itemsize}").byteswap().tobytes()
    assert (tmp_path / "a" / "c" / "0" / "0").read_bytes() == swapped
    with mounted(tmp_path / "a", tmp_path / "mnt", ("ro",)) as mount:
        assert mount.data.read_bytes() == parts.tobytes()


@pytest.mark.parametrize("data_type", ["float4_e2m1fn", "float6_e2m3fn", "complex_float6_e3m2fn", "uint2"])
def test_sub_byte_types_ignore_the_high_bits(tmp_path: Path, data_type: str) -> None:
    """A stored byte's high bits are not part of the element (the registry: "ignored"), so
    `data` shows the element alone, and what zarrfs writes leaves them zero."""
    bits = 4 if "float4" in data_type else 6 if "float6" in data_type else 2
    doc = _document(data_type, [0, 0] if data_type.startswith("complex") else 0)
    _write(tmp_path / "a", doc)
    count = math.prod(SHAPE) * (2 if data_type.startswith("complex") else 1)
    stored = np.arange(count, dtype=np.uint8) * 37  # every pattern of high and low bits
    (tmp_path / "a" / "c" / "0").mkdir(parents=True)
    (tmp_path / "a" / "c" / "0" / "0").write_bytes(stored.tobytes())
    low = (stored & ((1 << bits) - 1)).tobytes()
    with mounted(tmp_path / "a", tmp_path / "mnt") as mount:
        assert mount.data.read_bytes() == low
        mount.data.write_bytes(stored.tobytes())
    assert (tmp_path / "a" / "c" / "0" / "0").read_bytes() == low

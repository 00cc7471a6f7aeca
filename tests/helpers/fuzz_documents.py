"""What the property-based fuzz tests (tests/reliability/test_fuzz_*.py) share: hypothesis's
settings for them, the JSON values they draw, and the valid metadata documents (VALID_DOCS,
also the seeds of tests/fuzz/'s corpus, tests/fuzz/make_seeds.py) with their fill values."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from zarrfs.codecs import ChunkSpec, Pipeline
from zarrfs.errors import MetadataError
from zarrfs.formats.v3 import parse_metadata

# Locally every run explores new examples (and replays past failures from .hypothesis/); under
# CI (CI set in the environment) the examples are the same every time, so CI does not fail on
# a bug it happened to find today but not yesterday.
IN_CI = bool(os.environ.get("CI"))
FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=IN_CI,
    database=None if IN_CI else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- metadata ---------------------------------------------------------------------------------

SPECIAL_INTS = [
    0,
    1,
    -1,
    2,
    3,
    4,
    8,
    255,
    256,
    2**31,
    2**32,
    2**53 + 1,
    2**62,
    2**63,
    2**64,
    -(2**63),
    10**30,
]
SPECIAL_SCALARS = st.sampled_from(
    [
        None,
        True,
        False,
        0.0,
        -0.0,
        1.5,
        1e300,
        -1e300,
        float("inf"),
        float("-inf"),
        float("nan"),
        "",
        "NaN",
        "Infinity",
        "-Infinity",
        "0x7fc00000",
        "0x",
        "0xZZ",
        "bytes",
        "zstd",
        "regular",
        "default",
        "v2",
        "/",
        ".",
        "int32",
        "bool",
        "float64",
        "complex64",
        "C",
        "F",
        "start",
        "end",
        "little",
        "big",
        *SPECIAL_INTS,
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=10)
    | SPECIAL_SCALARS
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=10) | st.sampled_from(["name", "configuration"]), children, max_size=4
        )
    ),
    max_leaves=16,
)

BYTES: dict[str, Any] = {"name": "bytes", "configuration": {"endian": "little"}}


def doc(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [10, 12],
        "data_type": "int16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [BYTES],
        "attributes": {"a": [1, 2]},
        "dimension_names": ["y", "x"],
    }
    base.update(changes)
    return base


# Valid documents and the fill value each must parse to (raw bits, little-endian).
VALID: list[tuple[dict[str, Any], bytes]] = [
    (doc(), np.int16(0).tobytes()),
    (doc(
        data_type="float32",
        fill_value="NaN",
        codecs=[
            {"name": "transpose", "configuration": {"order": [1, 0]}},
            BYTES,
            {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
            {"name": "crc32c"},
        ],
    ), (0x7FC00000).to_bytes(4, "little")),
    (doc(
        data_type="bool",
        fill_value=False,
        chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}},
        codecs=[{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 5}}],
    ), b"\0"),
    (doc(
        data_type="complex64",
        fill_value=[1.0, "-Infinity"],
        codecs=[
            BYTES,
            {
                "name": "blosc",
                "configuration": {
                    "cname": "zstd",
                    "clevel": 5,
                    "shuffle": "bitshuffle",
                    "typesize": 8,
                    "blocksize": 0,
                },
            },
        ],
    ), np.array([1.0, -np.inf], dtype="<f4").tobytes()),
    (doc(
        shape=[16, 16],
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
        data_type="uint64",
        fill_value=2**64 - 1,
        codecs=[
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [4, 2],
                    "index_location": "start",
                    "codecs": [BYTES, {"name": "zstd", "configuration": {"level": 1}}],
                    "index_codecs": [BYTES, {"name": "crc32c"}],
                },
            }
        ],
    ), b"\xff" * 8),
    (doc(
        shape=[],
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": []}},
        dimension_names=[],
        data_type="bfloat16",
        fill_value="0x7fc0",
    ), (0x7FC0).to_bytes(2, "little")),
]
VALID_DOCS = [document for document, _ in VALID]


def open_fully(raw: bytes | str) -> bool:
    """Parse and build the pipeline; on success check the metadata survives a round trip.
    Whether the document was accepted."""
    try:
        meta = parse_metadata(raw)
        Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))
    except MetadataError as e:
        assert isinstance(e.member, str), f"MetadataError without a member: {e!r}"
        return False
    again = parse_metadata(json.dumps(meta.to_json()))
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(meta.to_json(), sort_keys=True)
    assert again.fill_value == meta.fill_value
    return True

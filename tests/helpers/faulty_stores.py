"""What the tests of the fault-injecting filesystem (tests/reliability/test_faulty_fs_*.py)
share: a Store over a FaultyFileSystem wrapping a local directory, the retry policies they use,
and a small array (sharded or plain) to read through it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from fsspec.implementations.local import LocalFileSystem

from tests.helpers.faulty_fs import FaultyFileSystem
from zarrfs.array import ZarrArray
from zarrfs.array_metadata import create_array
from zarrfs.formats.v3 import parse_metadata
from zarrfs.grid import Box
from zarrfs.store import RetryPolicy, Store

# Tests of giving up use a short deadline; tests of succeeding after faults a long one, so a
# loaded machine cannot turn a handful of retries into a missed deadline.
DEADLINE = 0.4
SHORT = RetryPolicy(deadline_seconds=DEADLINE, first_delay=0.01, max_delay=0.1)
PATIENT = RetryPolicy(deadline_seconds=10, first_delay=0.01, max_delay=0.05)


def faulty_store(
    root: Path, rules: Sequence[dict[str, Any]] = ()
) -> tuple[FaultyFileSystem, Store]:
    root.mkdir(parents=True, exist_ok=True)
    fs = FaultyFileSystem(fs=LocalFileSystem(auto_mkdir=True), rules=rules)
    return fs, Store(fs, str(root), retry=PATIENT)


# -- through the array ------------------------------------------------------------------------

SHARDED = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [16, 16],
    "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "attributes": {},
    "codecs": [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [4, 4],
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "zstd", "configuration": {"level": 1}},
                ],
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"},
                ],
            },
        }
    ],
}


VALUES = np.arange(256, dtype=np.int32).reshape(16, 16) + 1
WHOLE = Box((0, 0), (16, 16))


def make_array(s: Store, doc: dict[str, Any]) -> ZarrArray:
    array = create_array(s, parse_metadata(json.dumps(doc)), threads=2)
    array.write(WHOLE, VALUES)
    array.flush()
    return array

"""The oracle of the Zarr v1 tests itself (tests/helpers/v1_spec.py): the specification's
decoder reads what its writer wrote, and numcodecs' zlib and bz2 write the streams the modules
write."""

from __future__ import annotations

import bz2
import json
import zlib
from pathlib import Path

import numcodecs
import numpy as np

from tests.helpers.v1_spec import V1Case, chunk_key, grid_shape, read_v1

# -- the oracle itself -----------------------------------------------------------------------


def test_the_spec_decoder_reads_what_the_spec_writer_wrote(
    v1_store: tuple[V1Case, Path, np.ndarray],
) -> None:
    case, path, array = v1_store
    meta, decoded, present = read_v1(path)
    assert decoded.tobytes() == array.tobytes()
    assert meta["dtype"] == case.dtype and meta["order"] == case.order
    all_keys = {chunk_key(i) for i in np.ndindex(*grid_shape(case.shape, case.chunks))}
    assert present == all_keys - {chunk_key(i) for i in case.missing}
    assert json.loads((path / "attrs").read_text()) == case.attrs


def test_numcodecs_zlib_and_bz2_write_the_stream_the_modules_write() -> None:
    """The v1 spec's zlib/bz2 chunks are the plain module formats; numcodecs' codecs agree."""
    raw = np.arange(1000, dtype="<i4").tobytes()
    assert bytes(numcodecs.Zlib(level=4).encode(raw)) == zlib.compress(raw, 4)
    assert bytes(numcodecs.BZ2(level=3).encode(raw)) == bz2.compress(raw, 3)

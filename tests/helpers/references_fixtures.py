"""Reference sets for tests/store/references/test_references.py: HDF5 files written by h5py, described by
kerchunk (the oracle is h5py itself), and hand-made reference sets."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from kerchunk.hdf import SingleHdf5ToZarr

# Dataset name (as zarrfs mounts it: a group's arrays are directories) -> its values.
Datasets = dict[str, np.ndarray]


def write_hdf5(path: Path) -> Datasets:
    """A chunked gzip+shuffle 2-D dataset, a contiguous one, a 3-D one, a group of two and a
    dataset small enough for kerchunk to inline."""
    rng = np.random.default_rng(7)
    datasets: Datasets = {
        "chunked": rng.standard_normal((60, 50)).astype("f4"),
        "contiguous": np.arange(40 * 30, dtype="i2").reshape(40, 30),
        "cube": rng.standard_normal((6, 10, 12)),
        "grp/a": np.arange(100, dtype="i4") * 3,
        "grp/b": rng.integers(0, 255, (8, 8), dtype="u1"),
        "tiny": np.array([5, 6, 7, 8], dtype="i4"),
    }
    with h5py.File(path, "w") as f:
        f.create_dataset("chunked", data=datasets["chunked"], chunks=(16, 20),
                         compression="gzip", shuffle=True)
        f.create_dataset("contiguous", data=datasets["contiguous"])
        f.create_dataset("cube", data=datasets["cube"], chunks=(3, 5, 4))
        group = f.create_group("grp")
        group.create_dataset("a", data=datasets["grp/a"], chunks=(25,))
        group.create_dataset("b", data=datasets["grp/b"])
        f.create_dataset("tiny", data=datasets["tiny"])
    return datasets


def kerchunk_references(h5_path: Path, target: str | None = None) -> dict[str, Any]:
    """kerchunk's references for `h5_path`, naming it as `target` (default: its path)."""
    url = target if target is not None else str(h5_path)
    with open(h5_path, "rb") as f:
        references: dict[str, Any] = SingleHdf5ToZarr(f, url, inline_threshold=100).translate()
    return references


def write_json(path: Path, references: dict[str, Any]) -> Path:
    path.write_text(json.dumps(references))
    return path


def zarray(shape: tuple[int, ...], chunks: tuple[int, ...], dtype: str) -> str:
    return json.dumps({"zarr_format": 2, "shape": list(shape), "chunks": list(chunks),
                       "dtype": dtype, "compressor": None, "filters": None,
                       "fill_value": 0, "order": "C"})


def inline_references(values: np.ndarray) -> dict[str, Any]:
    """A v1 reference set of one 1-D array in two chunks: one base64, one plain text."""
    assert values.dtype == np.dtype("u1") and values.size % 2 == 0
    half = values.size // 2
    first, second = values[:half].tobytes(), values[half:].tobytes()
    return {"version": 1, "refs": {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "inline/.zarray": zarray(values.shape, (half,), "|u1"),
        "inline/0": "base64:" + base64.b64encode(first).decode(),
        "inline/1": second.decode("ascii"),
    }}


def raw_array_references(name: str, target: str, values: np.ndarray) -> dict[str, Any]:
    """v0 references of one uncompressed 1-D array stored whole at offset 0 of `target`."""
    return {
        f"{name}/.zarray": zarray(values.shape, values.shape, values.dtype.str),
        f"{name}/0": [target, 0, values.nbytes],
    }


def whole_file_references(name: str, directory: Path, values: np.ndarray, chunk: int) -> dict[str, Any]:
    """v1 references of one uncompressed 1-D array whose chunks are whole files of
    `directory` (`["url"]`: no offset, no size), as VirtualiZarr writes a file per chunk."""
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}),
                            f"{name}/.zarray": zarray(values.shape, (chunk,), values.dtype.str)}
    for index in range(-(-values.size // chunk)):
        part = directory / f"chunk{index}.bin"
        part.write_bytes(values[index * chunk : (index + 1) * chunk].tobytes())
        refs[f"{name}/{index}"] = [str(part)]
    return {"version": 1, "refs": refs}

"""The zarrs snapshot corpus: the arrays zarrs (the Rust implementation) writes through every
data type and codec it supports, the same values each time (github.com/zarrs/zarrs_snapshot_data,
commit 4f17fffca2807c2b5ecca56547db8499a4cb4e26, `supported/regular/`).

Its 575 arrays with fixed-size elements (all but the string, bytes and zarrs.optional ones)
are in tests/data/zarrs_corpus.tar.xz, as the corpus holds them (113 KB), made in a checkout by

    tar --sort=name --mtime=2020-01-01 --owner=0 --group=0 --numeric-owner -cJf zarrs_corpus.tar.xz \\
        $(dirname of each such supported/regular/*/*/*/*/zarr.json)

The tree is mounted once, read-only, as a hierarchy (a group document is added above the
arrays). Each array's `data` must equal that of its `bytes`-codec twin (same data type and fill
value; within the codec's bound for a lossy one), and each twin's `data` the elements of its
raw chunk files. The arrays that cannot mount yet are listed by codec in
`zarrs_corpus_expected.NOT_YET`, and one test checks that they, and only they, fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

from tests.helpers.mounting import VIEW_FILES, Mount, mounted
from tests.helpers.zarrs_corpus_expected import NOT_YET

ARCHIVE = Path(__file__).resolve().parent.parent / "data" / "zarrs_corpus.tar.xz"
PREFIX = "supported/regular/"
GROUP = json.dumps({"zarr_format": 3, "node_type": "group"})


def _documents() -> dict[str, dict[str, Any]]:
    """Each array's name below PREFIX -> its zarr.json, read from the archive."""
    found = {}
    with tarfile.open(ARCHIVE) as archive:
        for member in archive:
            if member.name.endswith("/zarr.json"):
                raw = archive.extractfile(member).read()  # type: ignore[union-attr]
                found[member.name.removeprefix(PREFIX).removesuffix("/zarr.json")] = json.loads(raw)
    return found


DOCUMENTS = _documents()
FAILING = {name: codec for codec, names in NOT_YET.items() for name in names}


def _twin_of(name: str) -> str:
    doc = DOCUMENTS[name]
    data_type = name.split("/")[0]
    twins = [t for t in DOCUMENTS if t.startswith(f"{data_type}/a2b/bytes/")
             and DOCUMENTS[t]["fill_value"] == doc["fill_value"]]
    assert len(twins) == 1, f"{name}: bytes twins {twins}"
    return twins[0]


TWINS = sorted(name for name in DOCUMENTS if "/a2b/bytes/" in name)
OTHERS = sorted(name for name in DOCUMENTS if name not in TWINS)


@dataclass
class Corpus:
    source: Path  # the extracted tree (PREFIX inside)
    mount: Mount

    def data(self, name: str) -> bytes:
        return (self.mount.path / PREFIX / name / "data").read_bytes()

    def problems(self) -> dict[str, str]:
        """Array name -> why the mount shows it as metadata only, from the daemon's log."""
        found = re.findall(r"array (\S+) is shown as metadata only: (.*)", self.mount.log())
        return {path.removeprefix(PREFIX): why for path, why in found}


def _extract(into: Path) -> Path:
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(into)  # (our own archive)
    _groups_above(into, [f"{PREFIX}{name}" for name in DOCUMENTS])
    return into


def _groups_above(top: Path, arrays: list[str]) -> None:
    """A group document in `top` and every directory between it and the arrays (paths below it)."""
    for name in arrays:
        for parent in Path(name).parents:
            if not (top / parent / "zarr.json").exists():
                (top / parent / "zarr.json").write_text(GROUP)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    source = _extract(tmp_path_factory.mktemp("zarrs-corpus") / "src")
    with mounted(source, source.parent / "mnt", ("ro",)) as mount:
        yield Corpus(source, mount)


# -- reads -------------------------------------------------------------------------------------

def _rounding(doc: Mapping[str, Any]) -> tuple[np.dtype[Any], float] | None:
    """(element type, largest error) of a chain that loses precision on the corpus' values;
    None when exact. Only numcodecs.fixedscaleoffset of floats does (it rounds
    scale * (x - offset) to an integer: 0.5 -> 1); bitround(keepbits10) keeps them all."""
    for codec in doc["codecs"]:
        config = codec.get("configuration", {})
        if codec["name"] == "numcodecs.fixedscaleoffset" and np.dtype(config["dtype"]).kind == "f":
            return np.dtype(config["dtype"]), 0.5 / config["scale"]
    return None


@pytest.mark.fast
@pytest.mark.parametrize("name", [n for n in OTHERS if n not in FAILING])
def test_reads_as_its_bytes_twin(corpus: Corpus, name: str) -> None:
    got, expected = corpus.data(name), corpus.data(_twin_of(name))
    rounding = _rounding(DOCUMENTS[name])
    if rounding is None:
        assert got == expected, f"{name}: data differs from {_twin_of(name)}"
        return
    dtype, error = rounding
    values, exact = np.frombuffer(got, dtype), np.frombuffer(expected, dtype)
    assert not np.array_equal(values, exact, equal_nan=True)  # (else the bound is not needed)
    np.testing.assert_allclose(values, exact, rtol=0, atol=error, equal_nan=True)


@pytest.mark.fast
@pytest.mark.parametrize("name", TWINS)
def test_bytes_twin_holds_its_chunk_files(corpus: Corpus, name: str) -> None:
    """The `bytes` codec's chunks are the elements, little-endian, in C order: the oracle
    that needs no Zarr reader. Sub-byte integers are as zarrs stores them, sign-extended."""
    doc = DOCUMENTS[name]
    (rows, cols), (chunk_rows, chunk_cols) = doc["shape"], doc["chunk_grid"]["configuration"]["chunk_shape"]
    got = corpus.data(name)
    itemsize = len(got) // (rows * cols)
    expected = np.zeros((rows, cols, itemsize), np.uint8)
    for i in range(rows // chunk_rows):
        for j in range(cols // chunk_cols):
            raw = (corpus.source / PREFIX / name / "c" / str(i) / str(j)).read_bytes()
            expected[i * chunk_rows:(i + 1) * chunk_rows, j * chunk_cols:(j + 1) * chunk_cols] = (
                np.frombuffer(raw, np.uint8).reshape(chunk_rows, chunk_cols, itemsize))
    assert got == expected.tobytes()


# -- what fails -----------------------------------------------------------------------------------


@pytest.mark.fast
def test_exactly_the_listed_arrays_fail(corpus: Corpus) -> None:
    """Every array but those of NOT_YET mounts with its `data`; those fail naming their codec."""
    missing = {name for name in DOCUMENTS if not (corpus.mount.path / PREFIX / name / "data").exists()}
    problems = corpus.problems()
    assert missing == set(FAILING), (
        f"fail but not listed: {sorted(missing - set(FAILING))}\n"
        f"listed but mount: {sorted(set(FAILING) - missing)}\n"
        + "\n".join(f"{n}: {problems.get(n)}" for n in sorted(missing - set(FAILING))))
    wrong = {name: problems.get(name) for name, codec in FAILING.items()
             if codec not in (problems.get(name) or "")}
    assert not wrong, f"fail for another reason than the listed codec: {wrong}"


# -- the registry's types: names, header views, writes --------------------------------------------

# user.zarr.dtype (numpy's type string where numpy has one for the flat view's element, else
# the registry's name) and the header views able to describe the element.
# (No TIFF of a type narrower than its byte; GDAL 3.6 has no Int8.)
NUMBER_VIEWS = {"data.npy", "data.raw.nhdr", "data.mhd"}
NEW_TYPES: dict[str, tuple[str, set[str]]] = {
    "int2": ("|i1", NUMBER_VIEWS | {"data.fits", "data.nii", "data.mrc"}),
    "uint2": ("|u1", NUMBER_VIEWS | {"data.vrt", "data.fits", "data.nii"}),  # (MRC has no uint8)
    "uint4": ("|u1", NUMBER_VIEWS | {"data.vrt", "data.fits", "data.nii"}),
    "float8_e4m3": ("float8_e4m3", set()),
    "float8_e5m2": ("float8_e5m2", set()),
    "complex_float16": ("complex_float16", {"data.npy"}),  # a record of real and imag float16
    "complex_float32": ("<c8", {"data.npy", "data.vrt", "data.tif", "data.h5", "data.nii", "data.mrc"}),
    "complex_float64": ("<c16", {"data.npy", "data.vrt", "data.tif", "data.h5", "data.nii"}),
    "complex_bfloat16": ("complex_bfloat16", set()),
    "complex_float8_e4m3": ("complex_float8_e4m3", set()),
    "complex_float8_e5m2": ("complex_float8_e5m2", set()),
}


@pytest.mark.parametrize("data_type", sorted(NEW_TYPES))
def test_registry_types_are_named_and_viewed(corpus: Corpus, data_type: str) -> None:
    (name,) = [t for t in TWINS if t.startswith(f"{data_type}/")]
    directory = corpus.mount.path / PREFIX / name
    dtype_name, views = NEW_TYPES[data_type]
    assert os.getxattr(directory / "data", "user.zarr.dtype").decode() == dtype_name
    fill = json.loads(os.getxattr(directory / "data", "user.zarr.fill_value"))
    assert fill == DOCUMENTS[name]["fill_value"]
    assert {n for n in os.listdir(directory) if n in VIEW_FILES} == views
    if "data.npy" in views:
        loaded = np.load(directory / "data.npy")
        assert loaded.shape == tuple(DOCUMENTS[name]["shape"])
        assert loaded.tobytes() == corpus.data(name)


MOUNTABLE = [name for name in sorted(DOCUMENTS) if name not in FAILING]


@pytest.fixture(scope="module")
def written(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every array that mounts, as an empty copy into which its twin's values were written
    through a mount (unmounted since: what is on disk is all zarrfs wrote)."""
    root = tmp_path_factory.mktemp("zarrs-written") / "src"
    for name in MOUNTABLE:
        (root / name).mkdir(parents=True)
        shutil.copy(corpus.source / PREFIX / name / "zarr.json", root / name)
    _groups_above(root, MOUNTABLE)
    with mounted(root, root.parent / "mnt") as mount:
        for name in MOUNTABLE:
            (mount.path / name / "data").write_bytes(corpus.data(_twin_of(name)))
    return root


def test_writes_read_back(corpus: Corpus, written: Path) -> None:
    """What zarrfs wrote through every codec chain reads back as the values written."""
    wrong = []
    with mounted(written, written.parent / "mnt-again", ("ro",)) as mount:
        for name in MOUNTABLE:
            got, expected = (mount.path / name / "data").read_bytes(), corpus.data(_twin_of(name))
            rounding = _rounding(DOCUMENTS[name])
            if rounding is None and got != expected:
                wrong.append(name)
            elif rounding is not None:
                dtype, error = rounding
                if np.abs(np.frombuffer(got, dtype) - np.frombuffer(expected, dtype)).max() > error:
                    wrong.append(name)
    assert not wrong


# v3 names of bytes-to-bytes codecs -> numcodecs' configuration of the same codec.
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _numcodecs_config(codec: Mapping[str, Any]) -> dict[str, Any]:
    config = dict(codec.get("configuration", {}))
    if codec["name"] == "blosc":
        config["shuffle"] = _BLOSC_SHUFFLE[config["shuffle"]]
    return {"id": codec["name"].removeprefix("numcodecs."), **config}


# Array-to-array codecs that keep a chunk's elements in C order on the corpus' values.
_SAME_ELEMENTS = {"reshape", "zarrs.squeeze", "bitround"}


# Bytes-to-bytes codecs no library but zarrfs's own decodes here (GDeflate: zarrs' alone):
# their chunks are checked by reading them back (test_writes_read_back), not here.
_NO_ORACLE = {"zarrs.gdeflate"}
_DECODABLE = [n for n in MOUNTABLE if not _rounding(DOCUMENTS[n])
              and DOCUMENTS[n]["codecs"][0]["name"] in {"bytes", "transpose", *_SAME_ELEMENTS}
              and not _NO_ORACLE & {c["name"] for c in DOCUMENTS[n]["codecs"]}]


@pytest.mark.parametrize("name", _DECODABLE)
def test_written_chunks_decode_to_zarrs_elements(corpus: Corpus, written: Path, name: str) -> None:
    """The chunks zarrfs wrote, decoded by numcodecs (bytes-to-bytes codecs) and numpy
    (transpose), hold the elements of zarrs' `bytes` twin's chunks (sub-byte integers: the
    same low bits; the high ones are free)."""
    codecs = DOCUMENTS[name]["codecs"]
    theirs = corpus.source / PREFIX / _twin_of(name) / "c"
    keys = sorted(str(p.relative_to(theirs)) for p in theirs.rglob("*") if p.is_file())
    assert sorted(str(p.relative_to(written / name / "c")) for p in (written / name / "c").rglob("*")
                  if p.is_file()) == keys
    mask = SUB_BYTE_MASKS.get(name.split("/")[0], 0xFF)
    chunk_shape = DOCUMENTS[name]["chunk_grid"]["configuration"]["chunk_shape"]
    for key in keys:
        raw = (written / name / "c" / key).read_bytes()
        for codec in codecs[[c["name"] for c in codecs].index("bytes") + 1:]:
            raw = bytes(numcodecs.get_codec(_numcodecs_config(codec)).decode(raw))
        elements = np.frombuffer(raw, np.uint8)
        if codecs[0]["name"] == "transpose":
            order = codecs[0]["configuration"]["order"]
            stored = elements.reshape(*(chunk_shape[axis] for axis in order), -1)
            elements = stored.transpose(*np.argsort(order), len(order)).reshape(-1)
        expected = np.frombuffer((theirs / key).read_bytes(), np.uint8)
        assert np.array_equal(elements & mask, expected & mask), f"{name}/c/{key}"


SUB_BYTE_MASKS = {"int2": 0x03, "uint2": 0x03, "int4": 0x0F, "uint4": 0x0F}

"""The interop matrix through a real mount: every case TensorStore can write is written by
TensorStore, mounted with `zarrfs mount -f`, and read through `data` and `chunks/` with
ordinary system calls (read, pread, O_DIRECT pread, mmap); a representative subset is also
written through the mount (pwrite, dd, a shared mapping, a chunk file) and read back by
TensorStore and zarr-python after unmounting.

File layout (little-endian, C order): bool is one byte 0/1, int4 one sign-extended byte,
bfloat16 its raw 2 bytes; these are exactly `interop_cases.bits` of what TensorStore reads
on a little-endian host.

Starting a daemon (a Python process importing trio, pyfuse3, numpy, fsspec) costs far more
than the checks of one small array, so each array is mounted once and the arrays of the
next few tests are written and mounted in the background while the current test runs.
"""

from __future__ import annotations

import math
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from mounting import Mount, mounted

# The catalogue is imported as tests/interop/conftest.py makes it importable for
# tests/interop/test_matrix.py: from its own directory, so both share one module.
sys.path.insert(0, str(Path(__file__).resolve().parent / "interop"))
from interop_cases import (
    CASES,
    DATA_TYPES,
    EMPTY,
    STORAGE,
    Case,
    assert_same_bits,
    bits,
    chunk_key,
    expected_keys,
    model,
    random_values,
    read_tensorstore,
    read_zarr_python,
    shard_index,
    stored_keys,
    write_tensorstore,
)

pytestmark = pytest.mark.skipif(
    sys.byteorder != "little", reason="the expected file bytes are the host's element bytes"
)

TENSORSTORE_CASES = [c for c in CASES if c.tensorstore]
BY_ID = {c.id: c for c in CASES}

# Written through the mount: every data type (5x7 in 2x3 chunks, so with edge chunks) and the
# layouts where a write lands in an unusual place in the store.
WRITE_CASE_IDS = [
    *(f"dtype-{dt}" for dt in DATA_TYPES),
    "shard-index-start",
    "shard-index-end",
    "shard-nested",
    "codec-transpose-3d-big-endian",
    "key-v2-dot",
    "key-v2-slash-sharded",
    "fill-float32-nan",
    "fill-float32-nan-payload-sharded",
    "shard-edge-only",
    "chunk-larger-than-array",
    "rank0",
]
WRITE_CASES = [BY_ID[i] for i in WRITE_CASE_IDS]
assert all(c.tensorstore for c in WRITE_CASES)

# Mounts prepared ahead of the running test. Two cores: more only queues up start-ups.
AHEAD = 3
MAX_CHUNK_FILES = 16  # chunk files read per array (all of them in today's matrix)
_TMPFS = "/dev/shm"


def _seed(case: Case) -> int:
    return zlib.crc32(case.id.encode())


# -- mounting ahead ----------------------------------------------------------------------------


@dataclass
class Prepared:
    """An array written by TensorStore (holding `model(case)`) and mounted."""

    case: Case
    path: Path
    mount: Mount
    cleanup: ExitStack  # unmounts (if still mounted) and deletes the array


class Preparer:
    """Writes and mounts the arrays of the next tests in background threads.

    `plan` is the order the tests will ask in; a key asked for out of order (or not planned)
    is simply prepared on demand."""

    def __init__(self, arrays: Path, mountpoints: Path, plan: list[tuple[str, Case]]) -> None:
        self.arrays = arrays
        self.mountpoints = mountpoints
        self.plan = plan
        self.position = {key: i for i, (key, _) in enumerate(plan)}
        self.futures: dict[str, Future[Prepared]] = {}
        self.pool = ThreadPoolExecutor(AHEAD, thread_name_prefix="prepare-mount")

    def take(self, key: str, case: Case) -> Prepared:
        self._start(key, case)
        position = self.position.get(key)
        if position is not None:
            for next_key, next_case in self.plan[position + 1 : position + 1 + AHEAD]:
                self._start(next_key, next_case)
        return self.futures.pop(key).result()

    def _start(self, key: str, case: Case) -> None:
        if key not in self.futures:
            self.futures[key] = self.pool.submit(self._prepare, key, case)

    def _prepare(self, key: str, case: Case) -> Prepared:
        path = self.arrays / key
        cleanup = ExitStack()
        try:
            cleanup.callback(shutil.rmtree, path, ignore_errors=True)
            write_tensorstore(str(path), case.doc, model(case))
            mount = cleanup.enter_context(mounted(path, self.mountpoints / key))
        except BaseException:
            cleanup.close()
            raise
        return Prepared(case, path, mount, cleanup)

    def close(self) -> None:
        """Unmount whatever was prepared for tests that did not run."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        for future in self.futures.values():
            if not future.cancelled() and future.exception() is None:
                future.result().cleanup.close()
        self.futures.clear()


_KINDS = {"test_reads_match_tensorstore": "read", "test_writes_reach_tensorstore_and_zarr": "write"}


def _key(test_name: str, case: Case) -> str:
    return f"{_KINDS[test_name]}-{case.id}"


@pytest.fixture(scope="module")
def preparer(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Preparer]:
    plan = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        name = getattr(item, "originalname", None)
        if item.path == Path(__file__) and callspec is not None and name in _KINDS:
            case = callspec.params["case"]
            plan.append((_key(name, case), case))
    # Arrays on tmpfs (TensorStore and zarrfs fsync every object); mountpoints under pytest's
    # base directory, where scripts/test looks for mounts left behind.
    shm = _TMPFS if os.path.isdir(_TMPFS) and os.access(_TMPFS, os.W_OK) else None
    arrays = Path(tempfile.mkdtemp(prefix="zarrfs-mount-matrix-", dir=shm))
    preparer = Preparer(arrays, tmp_path_factory.mktemp("mounts"), plan)
    try:
        yield preparer
    finally:
        preparer.close()
        shutil.rmtree(arrays, ignore_errors=True)


@pytest.fixture
def prepared(request: pytest.FixtureRequest, preparer: Preparer, case: Case) -> Iterator[Prepared]:
    ready = preparer.take(_key(request.node.originalname, case), case)
    with ready.cleanup:
        yield ready


# -- expected contents -------------------------------------------------------------------------


def _with_overhang(case: Case, data: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """`data` padded to whole chunks of the grid with the fill value (bit for bit)."""
    extended = tuple(-(-s // c) * c for s, c in zip(case.shape, case.chunk_shape, strict=True))
    out = np.empty(extended, dtype=data.dtype)
    out.reshape(-1).view(np.uint8).reshape(-1, data.dtype.itemsize)[:] = bits(fill)
    out[tuple(slice(0, s) for s in case.shape)] = data
    return out


def _chunk_slices(case: Case, index: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, case.chunk_shape, strict=True))


def _sample_chunks(case: Case, rng: np.random.Generator) -> list[tuple[int, ...]]:
    chunks = case.grid(case.chunk_shape)
    if len(chunks) <= MAX_CHUNK_FILES:
        return chunks
    middle = rng.choice(len(chunks) - 2, MAX_CHUNK_FILES - 2, replace=False) + 1
    return [chunks[0], *(chunks[int(i)] for i in sorted(middle)), chunks[-1]]


def _ranges(rng: np.random.Generator, size: int, count: int) -> Iterator[tuple[int, int]]:
    """(offset, length) pairs: random, mostly unaligned, some running past the end."""
    yield 0, size + 3
    yield size, 4
    for _ in range(count):
        offset = int(rng.integers(0, size + 1))
        yield offset, int(rng.integers(1, size - offset + 5))


def _assert_same_bytes(actual: bytes, expected: bytes, what: str) -> None:
    if actual != expected:
        differ = [i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e]
        first = differ[0] if differ else min(len(actual), len(expected))
        raise AssertionError(
            f"{what}: {len(actual)} bytes read, {len(expected)} expected; first difference at "
            f"byte {first}: got {actual[first : first + 8].hex()}, "
            f"expected {expected[first : first + 8].hex()}"
        )


def _assert_clean_log(mount: Mount) -> None:
    log = mount.log()
    assert "ERROR" not in log and "Traceback" not in log, log


# -- reading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", TENSORSTORE_CASES, ids=lambda c: c.id)
def test_reads_match_tensorstore(case: Case, prepared: Prepared) -> None:
    mount, path = prepared.mount, prepared.path
    written, fill = read_tensorstore(str(path))
    expected = bits(written).tobytes()
    size = len(expected)
    rng = np.random.default_rng(_seed(case))

    assert (mount.path / "zarr.json").read_bytes() == (path / "zarr.json").read_bytes()
    assert mount.data.stat().st_size == size

    # O_DIRECT: each pread reaches the daemon with its own offset and length.
    fd = os.open(mount.data, os.O_RDONLY | os.O_DIRECT)
    try:
        for offset, length in _ranges(rng, size, 24):
            _assert_same_bytes(os.pread(fd, length, offset), expected[offset : offset + length],
                               f"O_DIRECT pread({length}, {offset})")
    finally:
        os.close(fd)
    # Through the page cache, starting cold: the kernel reads ahead around each pread.
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        for offset, length in _ranges(rng, size, 12):
            _assert_same_bytes(os.pread(fd, length, offset), expected[offset : offset + length],
                               f"pread({length}, {offset})")
    finally:
        os.close(fd)

    _assert_same_bytes(mount.data.read_bytes(), expected, "data read whole")
    if size:
        with open(mount.data, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
            _assert_same_bytes(mapped[:], expected, "mmap of data")

    padded = _with_overhang(case, written, fill)
    itemsize = written.dtype.itemsize
    for index in _sample_chunks(case, rng):
        key = chunk_key(case.doc, index)
        chunk = bits(padded[_chunk_slices(case, index)]).tobytes()
        file = mount.chunk(key)
        assert file.stat().st_size == len(chunk), key
        _assert_same_bytes(file.read_bytes(), chunk, f"chunks/{key}")
        offset = int(rng.integers(0, len(chunk)))
        length = int(rng.integers(1, len(chunk) - offset + 1))
        if itemsize > 1 and length > 1 and offset % itemsize == 0:
            offset, length = offset + 1, length - 1
        fd = os.open(file, os.O_RDONLY | os.O_DIRECT)
        try:
            _assert_same_bytes(os.pread(fd, length, offset), chunk[offset : offset + length],
                               f"O_DIRECT pread({length}, {offset}) of chunks/{key}")
        finally:
            os.close(fd)
    assert sorted(os.listdir(mount.path)) == ["chunks", "data", "zarr.json"]
    _assert_clean_log(mount)


# -- writing -----------------------------------------------------------------------------------


class Image:
    """The expected contents of `data`, kept as its bytes, with the array view of them."""

    def __init__(self, case: Case, data: np.ndarray) -> None:
        self.case = case
        self.dtype = STORAGE[case.data_type]
        self.bytes = bytearray(bits(data).tobytes())

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.bytes), dtype=self.dtype).reshape(self.case.shape)

    def put(self, offset: int, data: bytes) -> None:
        self.bytes[offset : offset + len(data)] = data

    def put_chunk(self, index: Sequence[int], data: bytes) -> None:
        """What writing a whole chunk file does: its elements inside the array are set."""
        values = np.frombuffer(data, dtype=self.dtype).reshape(self.case.chunk_shape)
        array = self.array().copy()
        region = _chunk_slices(self.case, index)
        inside = tuple(slice(0, len(range(*s.indices(n))))
                       for s, n in zip(region, self.case.shape, strict=True))
        array[region] = values[inside]
        self.bytes = bytearray(bits(array).tobytes())


def _payload(case: Case, nbytes: int, rng: np.random.Generator) -> bytes:
    """`nbytes` of valid element bytes (0/1 for bool, -8..7 for int4) starting anywhere in an
    element."""
    itemsize = STORAGE[case.data_type].itemsize
    values = random_values(case.data_type, (nbytes // itemsize + 2,), rng)
    shift = int(rng.integers(0, itemsize))
    return bits(values).tobytes()[shift : shift + nbytes]


def _range(rng: np.random.Generator, size: int, itemsize: int) -> tuple[int, int]:
    """A random range of at least half the file that starts and ends inside elements."""
    offset = int(rng.integers(0, max(1, size // 2)))
    if itemsize > 1 and offset % itemsize == 0 and size > 2:
        offset += 1
    length = int(rng.integers(max(1, (size - offset) // 2), size - offset + 1))
    if itemsize > 1 and (offset + length) % itemsize == 0 and length > 1:
        length -= 1
    return offset, length


def _store_holds(path: Path, image: Image, step: str) -> None:
    data, _ = read_tensorstore(str(path))
    assert_same_bits(data, image.array(), f"TensorStore reading the store after {step}")


def _mount_shows(mount: Mount, image: Image, step: str) -> None:
    _assert_same_bytes(mount.data.read_bytes(), bytes(image.bytes), f"data after {step}")


def _check_shards(case: Case, path: Path, data: np.ndarray) -> None:
    """Each stored shard's index marks exactly the all-fill inner chunks empty."""
    config = case.shard_config
    if config is None:
        return
    fill = bits(case.fill)
    inner_shape = config["chunk_shape"]
    for index in case.grid(case.chunk_shape):
        key = chunk_key(case.doc, index)
        try:
            shard = (path / key).read_bytes()
        except FileNotFoundError:
            continue
        entries = shard_index(case, shard)
        for inner in np.ndindex(*entries.shape[:-1]):
            start = [i * s + j * c for i, s, j, c in
                     zip(index, case.chunk_shape, inner, inner_shape, strict=True)]
            region = data[tuple(slice(a, a + c) for a, c in zip(start, inner_shape, strict=True))]
            all_fill = region.size == 0 or bool((bits(region).reshape(-1, fill.size) == fill).all())
            empty = int(entries[inner][0]) == EMPTY
            assert empty == all_fill, f"shard {key!r} inner chunk {inner}: empty={empty}"


@pytest.mark.parametrize("case", WRITE_CASES, ids=lambda c: c.id)
def test_writes_reach_tensorstore_and_zarr(case: Case, prepared: Prepared,
                                           tmp_path: Path) -> None:
    mount, path = prepared.mount, prepared.path
    image = Image(case, model(case))
    _store_holds(path, image, "TensorStore wrote it")
    itemsize = image.dtype.itemsize
    size = len(image.bytes)
    rng = np.random.default_rng(_seed(case) + 1)

    # 1. pwrite, starting and ending inside elements, across chunks.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    fd = os.open(mount.data, os.O_RDWR)
    try:
        assert os.pwrite(fd, data, offset) == length
    finally:
        os.close(fd)  # close() stores the data
    image.put(offset, data)
    _mount_shows(mount, image, "pwrite")
    _store_holds(path, image, "pwrite and close")

    # 2. dd conv=notrunc, 5-byte blocks at a byte offset: partial elements in most writes.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    (tmp_path / "payload").write_bytes(data)
    subprocess.run(["dd", f"if={tmp_path / 'payload'}", f"of={mount.data}", "bs=5",
                    f"seek={offset}", "oflag=seek_bytes", "conv=notrunc", "status=none"],
                   check=True, capture_output=True)
    image.put(offset, data)
    _mount_shows(mount, image, "dd")
    _store_holds(path, image, "dd")

    # 3. A shared mapping: msync (mmap.flush) stores the data before the file is closed.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    with open(mount.data, "r+b") as f, mmap.mmap(f.fileno(), 0) as mapped:
        mapped[offset : offset + length] = data
        mapped.flush()
        image.put(offset, data)
        _store_holds(path, image, "a write through a shared mapping and msync")
    _mount_shows(mount, image, "a write through a shared mapping")

    # 4. A whole chunk file (the last one: an edge chunk in most cases). Its overhang is
    # written too, and reads back as the fill value.
    chunks = case.grid(case.chunk_shape)
    index = chunks[-1]
    key = chunk_key(case.doc, index)
    chunk_bytes = math.prod(case.chunk_shape) * itemsize
    data = _payload(case, chunk_bytes, rng)
    with open(mount.chunk(key), "r+b", buffering=0) as f:
        assert f.write(data) == chunk_bytes
    image.put_chunk(index, data)
    padded = _with_overhang(case, image.array(), case.fill)
    _assert_same_bytes(mount.chunk(key).read_bytes(), bits(padded[_chunk_slices(case, index)])
                       .tobytes(), f"chunks/{key} after writing it")
    _mount_shows(mount, image, f"writing chunks/{key}")
    _store_holds(path, image, f"writing chunks/{key}")

    # 5. A stored chunk overwritten with the fill value is deleted from the store.
    key = next(k for k in (chunk_key(case.doc, i) for i in chunks) if k in stored_keys(str(path)))
    index = next(i for i in chunks if chunk_key(case.doc, i) == key)
    fill_chunk = bits(case.fill).tobytes() * math.prod(case.chunk_shape)
    with open(mount.chunk(key), "r+b", buffering=0) as f:
        assert f.write(fill_chunk) == len(fill_chunk)
    image.put_chunk(index, fill_chunk)
    assert key not in stored_keys(str(path)), f"{key} is all fill value but still stored"
    _mount_shows(mount, image, f"filling chunks/{key}")

    status = mount.unmount()
    assert status == 0, mount.log()
    _assert_clean_log(mount)

    final = image.array()
    _store_holds(path, image, "unmounting")
    assert stored_keys(str(path)) == expected_keys(case, final)
    _check_shards(case, path, final)
    if case.zarr_python:
        seen, fill = read_zarr_python(str(path))
        assert_same_bits(seen, final, "zarr-python reading the array after unmounting")
        assert_same_bits(fill, case.fill, "zarr-python's fill value")


def test_write_subset_covers_the_brief() -> None:
    """Guard against the write subset silently shrinking."""
    data_types = {c.data_type for c in WRITE_CASES}
    assert data_types == set(STORAGE)
    ids = " ".join(WRITE_CASE_IDS)
    for needle in ("index-start", "index-end", "nested", "transpose-3d-big-endian", "key-v2",
                   "nan", "edge-only", "chunk-larger-than-array"):
        assert needle in ids


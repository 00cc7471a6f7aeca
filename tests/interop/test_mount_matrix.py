"""The interop matrix through a real mount: every case TensorStore can write is written by
TensorStore, mounted with `zarrfs mount -f`, and read through `data` and `chunks/` with
ordinary system calls (read, pread, O_DIRECT pread, mmap); a representative subset is also
written through the mount (pwrite, dd, a shared mapping, a chunk file) and read back by
TensorStore and zarr-python after unmounting.

File layout (little-endian, C order): bool is one byte 0/1, int4 one sign-extended byte,
bfloat16 its raw 2 bytes; these are exactly `interop_values.bits` of what TensorStore reads
on a little-endian host.

Each array is mounted once, and all its read checks share that mount. The daemons are
forked from a server that has already imported zarrfs (see `zarrfs_command`): starting the
script costs more than everything a test checks.
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.interop_cases import CASES
from tests.helpers.interop_docs import chunk_key
from tests.helpers.interop_io import read_tensorstore, read_zarr_python, write_tensorstore
from tests.helpers.interop_model import EMPTY, Case, expected_keys, model, shard_index, stored_keys
from tests.helpers.interop_values import DATA_TYPES, STORAGE, assert_same_bits, bits, random_values
from tests.helpers.mounting import Mount, without_views

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

MAX_CHUNK_FILES = 16  # chunk files read per array (all of them in today's matrix)
_TMPFS = "/dev/shm"


def _seed(case: Case) -> int:
    return zlib.crc32(case.id.encode())


# -- starting daemons cheaply ------------------------------------------------------------------

# A fork server: imports what `zarrfs mount` imports, once, then forks one daemon per request
# and runs `zarrfs.cli.main(argv)` in it, with the requester's stdin, stdout and stderr.
# Single-threaded, so forking is safe; exits when its stdin (a pipe from pytest) closes.
_SERVER = r"""
import json, os, select, socket, sys, traceback
import zarrfs.cli.command_line, zarrfs.daemon.run

server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(64)
print("ready", flush=True)
waiting = {}
while True:
    readable, _, _ = select.select([server, sys.stdin], [], [], 0.02)
    if sys.stdin in readable and not os.read(0, 1):
        break
    if server in readable:
        connection, _ = server.accept()
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        pid = os.fork()
        if pid == 0:
            for inherited in (server, connection, *waiting.values()):
                inherited.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            status = 1
            try:
                status = zarrfs.cli.main(json.loads(message))
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        for fd in fds:
            os.close(fd)
        connection.sendall(b"%d\n" % pid)
        waiting[pid] = connection
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        connection = waiting.pop(pid)
        connection.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
        connection.close()
"""

# What `mounted` runs instead of the zarrfs script: asks the server for a daemon, forwards
# signals to it and exits with its status, so it stands in for the daemon's process.
_CLIENT = r"""
import json, os, signal, socket, sys
connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
connection.connect(sys.argv[1])
socket.send_fds(connection, [json.dumps(sys.argv[2:]).encode()], [0, 1, 2])
replies = connection.makefile("rb")
pid = int(replies.readline())
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, lambda signum, _: os.kill(pid, signum))
status = int(replies.readline() or b"1")
sys.exit(128 - status if status < 0 else status)
"""


@pytest.fixture(scope="module")
def zarrfs_command(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ...]]:
    """A command that behaves like the zarrfs script but starts a daemon in milliseconds.

    A daemon started from the script spends about 0.4 s of CPU importing numpy, trio,
    pyfuse3 and fsspec, which is most of the cost of this file's 150-odd mounts. The
    daemons forked here run the same `zarrfs.cli.main` on the same arguments; the script
    itself is exercised by test_mount.py and test_mount_types.py."""
    socket_path = tmp_path_factory.mktemp("forkserver") / "socket"
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(socket_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        assert server.stdout.readline() == b"ready\n", "the fork server did not start"
        yield (sys.executable, "-S", "-c", _CLIENT, str(socket_path))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def array_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for the array, on tmpfs when there is one (TensorStore and zarrfs fsync
    every object they write)."""
    if os.path.isdir(_TMPFS) and os.access(_TMPFS, os.W_OK):
        directory = Path(tempfile.mkdtemp(prefix="zarrfs-mount-matrix-", dir=_TMPFS))
        try:
            yield directory / "array"
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    else:
        yield tmp_path / "array"


@pytest.fixture
def prepared(case: Case, array_dir: Path, mount_array: Callable[..., Mount],
             zarrfs_command: tuple[str, ...]) -> tuple[Mount, Path]:
    """The case's model written by TensorStore, and mounted (unmounted after the test)."""
    write_tensorstore(str(array_dir), case.doc, model(case))
    return mount_array(array_dir, command=zarrfs_command), array_dir


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
        return list(chunks)
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


@pytest.mark.fast
@pytest.mark.parametrize("case", TENSORSTORE_CASES, ids=lambda c: c.id)
def test_reads_match_tensorstore(case: Case, prepared: tuple[Mount, Path]) -> None:
    mount, path = prepared
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
    assert without_views(os.listdir(mount.path)) == ["chunks", "data", "zarr.json"]
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
    return bytes(bits(values).tobytes()[shift : shift + nbytes])


def _range(rng: np.random.Generator, size: int, itemsize: int) -> tuple[int, int]:
    """A random range of at least half the file that starts and ends inside elements."""
    offset = int(rng.integers(0, max(1, size // 2)))
    if itemsize > 1 and offset % itemsize == 0 and size > 2:
        offset += 1
    length = int(rng.integers(max(1, (size - offset) // 2), size - offset + 1))
    if itemsize > 1 and (offset + length) % itemsize == 0 and length > 1:
        length -= 1
    return offset, length


def _pwrite(file: Path, data: bytes, offset: int) -> None:
    """One pwrite, then close (which stores the data)."""
    fd = os.open(file, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, offset) == len(data)
    finally:
        os.close(fd)


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


@pytest.mark.fast
@pytest.mark.parametrize("case", WRITE_CASES, ids=lambda c: c.id)
def test_writes_reach_tensorstore_and_zarr(case: Case, prepared: tuple[Mount, Path],
                                           tmp_path: Path) -> None:
    mount, path = prepared
    image = Image(case, model(case))
    _store_holds(path, image, "TensorStore wrote it")
    itemsize = image.dtype.itemsize
    size = len(image.bytes)
    rng = np.random.default_rng(_seed(case) + 1)

    # 1. pwrite, starting and ending inside elements, across chunks.
    offset, length = _range(rng, size, itemsize)
    data = _payload(case, length, rng)
    _pwrite(mount.data, data, offset)
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
    _pwrite(mount.chunk(key), data, 0)
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
    _pwrite(mount.chunk(key), fill_chunk, 0)
    image.put_chunk(index, fill_chunk)
    assert key not in stored_keys(str(path)), f"{key} is all fill value but still stored"
    _mount_shows(mount, image, f"filling chunks/{key}")

    status = mount.unmount()
    assert status == 0, mount.log()
    _assert_clean_log(mount)

    final = image.array()
    _store_holds(path, image, "unmounting")
    assert key not in stored_keys(str(path)), f"{key} is all fill value but stored by unmounting"
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


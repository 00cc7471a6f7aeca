"""A real mount driven by random operations and checked against a numpy model.

A Hypothesis state machine opens, reads and writes the files of a mounted array exactly as a
program would: `pread`, `pwrite` (element-aligned or not; in chunk files up to and past the
end: EFBIG; `data` would grow, which test_resize.py covers),
writes through a shared `mmap` of `data` (with or without `msync`; chunk files are direct_io
and refuse shared mappings), whole-file and partial chunk-file writes (an edge chunk's
overhang keeps the fill value), `fsync`, close and reopen, unmount and remount. The model is
the flat file itself (a numpy array in the file's byte order). After every step `data` and
every chunk file read back equal the model byte for byte; after every `fsync`, close and
unmount TensorStore, reading the store directly, finds the model exactly.

Layouts: plain chunks; shards with the index at the end and at the start; shards of shards;
transpose + big-endian bytes codec (mounted with endian=big, in 3-D); "v2" chunk keys; a
float32 array whose fill value is NaN. Each is small (3-13 KB), with partial edge chunks.

Bounded for CI: 5 examples of 25 steps per layout, about 30 s for the file, most of it
mounting. A longer soak run, N examples of 50 steps per layout (about 2 s per example, so
N=500 takes two hours):

    ZARRFS_SOAK=500 .venv/bin/pytest tests/reliability/test_mount_model.py

With CI set the examples are the same on every run. A failure prints the whole sequence of
steps; shrinking it (many remounts: minutes) is off unless ZARRFS_SHRINK=1. The number of
random steps run is printed at the end of the module (visible with -q too) and, when
ZARRFS_STATS names a file, appended to it as one JSON line.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import mmap
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import tensorstore as ts
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.helpers.figures import report_figures
from tests.helpers.mounting import Mount, mounted

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

SOAK = int(os.environ.get("ZARRFS_SOAK", "0") or 0)
IN_CI = bool(os.environ.get("CI"))
# CI replays the same examples every time (no failure that depends on the day); locally and in
# soak runs every run explores new ones and replays past failures from .hypothesis/.
MODEL_SETTINGS = settings(
    max_examples=SOAK or 5,
    stateful_step_count=50 if SOAK else 25,
    deadline=None,
    derandomize=IN_CI and not SOAK,
    database=None if IN_CI and not SOAK else settings.default.database,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
    # Shrinking replays sequences of real mounts: minutes. The failing sequence is printed
    # whole without it; ZARRFS_SHRINK=1 asks for the shortest one.
    phases=[p for p in Phase if p != Phase.shrink or os.environ.get("ZARRFS_SHRINK")],
)
STEPS_BETWEEN_REMOUNTS = 10  # a remount costs ~0.5 s; this bounds how many an example makes
MAX_WRITE = 3000  # bytes

STATS: Counter[str] = Counter()

# -- layouts ----------------------------------------------------------------------------------


def _bytes(endian: str = "little") -> dict[str, Any]:
    return {"name": "bytes", "configuration": {"endian": endian}}


_ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
_GZIP = {"name": "gzip", "configuration": {"level": 1}}


def _sharding(inner: list[int], codecs: list[dict[str, Any]], at: str) -> dict[str, Any]:
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": codecs,
        "index_codecs": [_bytes(), {"name": "crc32c"}], "index_location": at}}


def _doc(shape: list[int], dtype: str, chunks: list[int], codecs: list[dict[str, Any]],
         fill: Any = 0, keys: tuple[str, str] = ("default", "/")) -> dict[str, Any]:
    return {
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": keys[0], "configuration": {"separator": keys[1]}},
        "fill_value": fill, "codecs": codecs, "attributes": {},
    }


@dataclass(frozen=True)
class Layout:
    name: str
    doc: dict[str, Any]
    options: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.doc["shape"])

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The shape of one chunk file: the chunk, or the shard when sharded."""
        return tuple(self.doc["chunk_grid"]["configuration"]["chunk_shape"])

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunk_shape, strict=True))

    @property
    def file_dtype(self) -> np.dtype[Any]:
        order = ">" if "endian=big" in self.options else "<"
        return np.dtype(self.doc["data_type"]).newbyteorder(order)

    @property
    def fill(self) -> np.ndarray:
        value = self.doc["fill_value"]
        return np.array(float(value) if isinstance(value, str) else value, dtype=self.file_dtype)

    def region(self, index: tuple[int, ...]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """Where chunk file `index` lies: (its part inside the array, the same part inside the
        chunk file); the rest of the chunk file is overhang past the array's edge."""
        in_array, in_chunk = [], []
        for i, c, s in zip(index, self.chunk_shape, self.shape, strict=True):
            stop = min((i + 1) * c, s)
            in_array.append(slice(i * c, stop))
            in_chunk.append(slice(0, stop - i * c))
        return tuple(in_array), tuple(in_chunk)

    def chunk_key(self, index: tuple[int, ...]) -> str:
        name, separator = (self.doc["chunk_key_encoding"][k] for k in ("name", "configuration"))
        parts = [*(["c"] if name == "default" else []), *map(str, index)]
        return separator["separator"].join(parts)


LAYOUTS = [
    Layout("plain", _doc([37, 45], "uint16", [8, 10], [_bytes(), _ZSTD])),
    Layout("shard-index-end", _doc([40, 50], "int32", [16, 20],
                                   [_sharding([4, 5], [_bytes(), _ZSTD], "end")])),
    Layout("shard-index-start", _doc([30, 44], "int64", [12, 16],
                                     [_sharding([6, 8], [_bytes(), _GZIP], "start")], fill=7)),
    Layout("nested-shards", _doc([48, 40], "uint32", [24, 20], [
        _sharding([12, 10], [_sharding([6, 5], [_bytes(), _ZSTD], "end")], "start")])),
    Layout("transpose-big-endian", _doc([9, 14, 11], "int16", [4, 6, 5], [
        {"name": "transpose", "configuration": {"order": [2, 0, 1]}}, _bytes("big"), _ZSTD]),
        options=("endian=big",)),
    Layout("v2-keys", _doc([33, 50], "int32", [10, 10], [_bytes(), _ZSTD], fill=-1,
                           keys=("v2", "."))),
    Layout("nan-fill-float32", _doc([41, 39], "float32", [10, 13], [_bytes(), {"name": "crc32c"}],
                                    fill="NaN")),
]


# -- the model --------------------------------------------------------------------------------


class Model:
    """The array as the mount shows it: `values` in the file's byte order."""

    def __init__(self, layout: Layout, values: np.ndarray) -> None:
        self.layout = layout
        self.values = np.ascontiguousarray(values.astype(layout.file_dtype))
        self.itemsize = self.values.dtype.itemsize

    def size(self, target: str | tuple[int, ...]) -> int:
        shape = self.layout.shape if target == "data" else self.layout.chunk_shape
        return math.prod(shape) * self.itemsize

    def chunk(self, index: tuple[int, ...]) -> np.ndarray:
        """A chunk file's elements: the chunk's values, the fill value in the overhang."""
        padded = np.full(self.layout.chunk_shape, self.layout.fill, dtype=self.values.dtype)
        in_array, in_chunk = self.layout.region(index)
        padded[in_chunk] = self.values[in_array]
        return padded

    def read(self, target: str | tuple[int, ...]) -> bytes:
        elements = self.values if target == "data" else self.chunk(target)  # type: ignore[arg-type]
        return elements.tobytes()

    def write(self, target: str | tuple[int, ...], offset: int, payload: bytes) -> int:
        """Apply a write; how many bytes a pwrite of `payload` at `offset` reports."""
        size = self.size(target)
        payload = payload[: max(0, size - offset)]
        elements = self.values if target == "data" else self.chunk(target)  # type: ignore[arg-type]
        flat = elements.reshape(-1).view(np.uint8)
        flat[offset : offset + len(payload)] = np.frombuffer(payload, np.uint8)
        if target != "data":
            in_array, in_chunk = self.layout.region(target)  # type: ignore[arg-type]
            self.values[in_array] = elements[in_chunk]  # the overhang is dropped
        return len(payload)


# -- comparisons ------------------------------------------------------------------------------


def assert_same_bytes(actual: bytes, expected: bytes, what: str, itemsize: int) -> None:
    if actual == expected:
        return
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} bytes, expected {len(expected)}")
    diff = np.flatnonzero(np.frombuffer(actual, np.uint8) != np.frombuffer(expected, np.uint8))
    first = int(diff[0])
    start = first - first % itemsize
    raise AssertionError(
        f"{what}: {len(diff)} bytes differ, the first at byte {first} "
        f"(element {first // itemsize}): "
        f"{actual[start : start + 4 * itemsize].hex(' ', itemsize)} instead of "
        f"{expected[start : start + 4 * itemsize].hex(' ', itemsize)}")


def tensorstore_read(root: Path) -> np.ndarray:
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root)}}
    return np.asarray(ts.open(spec, open=True).result().read().result())


@pytest.fixture(scope="module", autouse=True)
def _print_step_count(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    seconds = time.monotonic() - started
    report_figures(request.config,
            f"mount model: {STATS['steps']} random steps in {STATS['examples']} examples "
            f"({STATS['remounts']} remounts, {STATS['store_checks']} store checks) "
            f"in {seconds:.0f} s",
            {"test": "mount_model", **STATS, "seconds": round(seconds, 1)})


# -- the state machine ------------------------------------------------------------------------

Target = str | tuple[int, ...]
Step = TypeVar("Step", bound=Callable[..., None])


@dataclass
class _Opened:
    fd: int
    wrote: bool = False


def step(*, counted: bool = True) -> Callable[[Step], Step]:
    """Count a rule's runs, and mark the machine unhealthy while it runs: when a step fails,
    teardown then only cleans up instead of checking (the failure is already on its way)."""

    def decorate(function: Step) -> Step:
        @functools.wraps(function)
        def run(self: MountMachine, *args: Any, **kwargs: Any) -> None:
            self.healthy = False
            function(self, *args, **kwargs)
            self.healthy = True
            if counted:
                STATS["steps"] += 1
                self.steps_since_remount += 1

        return run  # type: ignore[return-value]

    return decorate


class MountMachine(RuleBasedStateMachine):
    def __init__(self, layout: Layout, workdir: Path) -> None:
        super().__init__()
        self.layout = layout
        self.example = Path(tempfile.mkdtemp(prefix=f"{layout.name}-", dir=workdir))
        self.root = self.example / "array.zarr"
        self.model: Model
        self.mount: Mount | None = None
        self.mounts = 0
        self.stack = contextlib.ExitStack()
        self.files: dict[Target, _Opened] = {}
        self.steps_since_remount = 0
        self.healthy = True
        STATS["examples"] += 1

    # -- set-up and tear-down ----------------------------------------------------------------

    @initialize(seed=st.integers(0, 2**32 - 1), stored=st.floats(0.0, 1.0))
    @step(counted=False)
    def create(self, seed: int, stored: float) -> None:
        """Write the array with TensorStore: random values in a random part of the chunks,
        the rest never stored (fill value)."""
        self.root.mkdir()
        (self.root / "zarr.json").write_text(json.dumps(self.layout.doc, indent=1))
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(self.root)}}
        array = ts.open(spec, open=True).result()
        rng = np.random.default_rng(seed)
        dtype = array.dtype.numpy_dtype
        for index in np.ndindex(*self.layout.grid):
            if rng.random() < stored:
                in_array, _ = self.layout.region(index)
                box = tuple(s.stop - s.start for s in in_array)
                raw = rng.integers(0, 256, (*box, dtype.itemsize), dtype=np.uint8)
                array[in_array].write(raw.view(dtype).reshape(box)).result()
        self.model = Model(self.layout, tensorstore_read(self.root))
        # Mounted by the first step: Hypothesis also runs examples of no steps at all.

    def _mount(self) -> None:
        self.mounts += 1
        self.mount = self.stack.enter_context(
            mounted(self.root, self.example / f"mnt{self.mounts}", self.layout.options))

    def _unmount(self) -> None:
        self._close_all()
        assert self.mount is not None
        status = self.mount.unmount()
        assert status == 0, f"zarrfs exited with {status}:\n{self.mount.log()}"
        self.stack.close()
        self.mount = None

    def teardown(self) -> None:
        try:
            if self.healthy and self.mount is not None:
                self._unmount()
                self._check_store("after the last unmount")
        finally:
            with contextlib.suppress(OSError):
                self._close_all()
            self.stack.close()  # unmounts whatever happened
        if self.healthy:
            shutil.rmtree(self.example, ignore_errors=True)

    # -- helpers -----------------------------------------------------------------------------

    def _path(self, target: Target) -> Path:
        assert self.mount is not None
        if target == "data":
            return self.mount.data
        return self.mount.chunk(self.layout.chunk_key(target))  # type: ignore[arg-type]

    def _opened(self, target: Target) -> _Opened:
        if target not in self.files:
            self.files[target] = _Opened(os.open(self._path(target), os.O_RDWR))
        return self.files[target]

    def _close_all(self) -> None:
        files, self.files = self.files, {}
        for opened in files.values():
            os.close(opened.fd)

    def _check_store(self, when: str) -> None:
        STATS["store_checks"] += 1
        stored = tensorstore_read(self.root).astype(self.model.values.dtype)
        assert_same_bytes(stored.tobytes(), self.model.read("data"),
                          f"{self.layout.name}: TensorStore {when}", self.model.itemsize)

    def _expect_efbig(self, target: Target, payload: bytes, offset: int) -> None:
        try:
            os.pwrite(self._opened(target).fd, payload, offset)
        except OSError as e:
            assert e.errno == errno.EFBIG, e
        else:
            raise AssertionError(f"pwrite at {offset}, past the end of {target}, succeeded")

    def _draw_target(self, data: st.DataObject) -> Target:
        return data.draw(st.one_of(st.just("data"), self._chunks()), label="file")

    def _chunks(self) -> st.SearchStrategy[tuple[int, ...]]:
        return st.tuples(*(st.integers(0, g - 1) for g in self.layout.grid))

    def _draw_range(self, data: st.DataObject, target: Target, *,
                    past_end: bool) -> tuple[int, int]:
        """(offset, length): element-aligned or not, anywhere in the file (or past its end)."""
        size = self.model.size(target)
        item = self.model.itemsize
        aligned = data.draw(st.booleans(), label="aligned")
        limit = size + (2 * item if past_end else -1)
        offset = data.draw(st.integers(0, limit), label="offset")
        length = data.draw(st.integers(1, min(MAX_WRITE, size)), label="length")
        if aligned:
            offset -= offset % item
            length = max(item, length - length % item)
        return offset, length

    def _draw_payload(self, data: st.DataObject, offset: int, length: int) -> bytes:
        """Random bytes, the fill value (so chunks become empty and are deleted), or one byte
        repeated."""
        kind = data.draw(st.sampled_from(["random", "fill", "byte"]), label="payload")
        if kind == "random":
            seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
            return random.Random(seed).randbytes(length)
        if kind == "fill":
            fill = self.layout.fill.tobytes()
            phase = offset % len(fill)
            return (fill * (length // len(fill) + 2))[phase : phase + length]
        return bytes([data.draw(st.integers(0, 255), label="byte")]) * length

    # -- rules: one for all operations, drawn with these weights, and remounting -------------

    OPERATIONS = (["pwrite"] * 4 + ["pread"] * 2 + ["chunk_file", "mmap", "past_end", "fsync",
                                                    "close"])

    @rule(data=st.data())
    @step()
    def operate(self, data: st.DataObject) -> None:
        if self.mount is None:
            self._mount()
        kind = data.draw(st.sampled_from(self.OPERATIONS), label="operation")
        STATS[kind] += 1
        {"pread": self._pread, "pwrite": self._pwrite, "chunk_file": self._write_whole_chunk_file,
         "mmap": self._mmap_write, "past_end": self._pwrite_past_the_end, "fsync": self._fsync,
         "close": lambda _: self._close_and_reopen()}[kind](data)

    @precondition(lambda self: self.steps_since_remount >= STEPS_BETWEEN_REMOUNTS)
    @rule()
    @step()
    def remount(self) -> None:
        STATS["remounts"] += 1
        self._unmount()
        self._check_store("after unmount")
        self._mount()
        self.steps_since_remount = -1

    # -- the operations ----------------------------------------------------------------------

    def _pread(self, data: st.DataObject) -> None:
        target = self._draw_target(data)
        offset, length = self._draw_range(data, target, past_end=True)
        got = os.pread(self._opened(target).fd, length, offset)
        expected = self.model.read(target)[offset : offset + length]
        assert_same_bytes(got, expected, f"pread {target} [{offset}:+{length}]", 1)

    def _pwrite(self, data: st.DataObject) -> None:
        """Anywhere in `data` or a chunk file; in a chunk file at or past the end: EFBIG;
        across it: short. (`data` grows instead: test_resize.py; here it stays in bounds.)"""
        target = self._draw_target(data)
        offset, length = self._draw_range(data, target, past_end=target != "data")
        if target == "data":
            length = min(length, self.model.size(target) - offset)
        payload = self._draw_payload(data, offset, length)
        if offset >= self.model.size(target):
            self._expect_efbig(target, payload, offset)
            return
        opened = self._opened(target)
        written = os.pwrite(opened.fd, payload, offset)
        opened.wrote = True
        expected = self.model.write(target, offset, payload)  # short at the end of the file
        assert written == expected, f"pwrite {target} [{offset}:+{length}] wrote {written}"

    def _pwrite_past_the_end(self, data: st.DataObject) -> None:
        target = data.draw(self._chunks(), label="chunk")  # (data grows: test_resize.py)
        beyond = data.draw(st.integers(0, 64), label="beyond")
        self._expect_efbig(target, b"\x01\x02\x03", self.model.size(target) + beyond)

    def _write_whole_chunk_file(self, data: st.DataObject) -> None:
        """A program rewriting a chunk file from its start, as `cp` or numpy.tofile would."""
        target = data.draw(self._chunks(), label="chunk")
        size = self.model.size(target)
        payload = self._draw_payload(data, 0, size)
        with open(self._path(target), "r+b") as f:
            assert f.write(payload) == size
        self.model.write(target, 0, payload)

    def _mmap_write(self, data: st.DataObject) -> None:
        """Map `data` shared, check what the mapping shows, write through it (with msync or
        without: then close writes the pages back). Chunk files are direct_io files, which
        libfuse 3.14 cannot let the kernel map shared (test_mount.py checks they refuse it)."""
        target = "data"
        offset, length = self._draw_range(data, target, past_end=False)
        size = self.model.size(target)
        length = min(length, size - offset)
        payload = self._draw_payload(data, offset, length)
        sync = data.draw(st.booleans(), label="msync")
        fd = os.open(self._path(target), os.O_RDWR)
        try:
            with mmap.mmap(fd, size) as mapped:
                assert_same_bytes(mapped[:], self.model.read(target), f"mmap of {target}", 1)
                mapped[offset : offset + length] = payload
                if sync:
                    mapped.flush()
        finally:
            os.close(fd)
        self.model.write(target, offset, payload)

    def _fsync(self, data: st.DataObject) -> None:
        """fsync writes every dirty chunk of the array back: the store then holds the model."""
        targets = sorted(self.files, key=str) or ["data"]
        target = data.draw(st.sampled_from(targets), label="file")
        os.fsync(self._opened(target).fd)
        self._check_store(f"after fsync of {target}")

    def _close_and_reopen(self) -> None:
        """Closing a file that was written returns once its writes are stored (files reopen
        as the next steps need them)."""
        wrote = any(opened.wrote for opened in self.files.values())
        self._close_all()
        if wrote:
            self._check_store("after close")

    @invariant()
    @step(counted=False)
    def mount_equals_model(self) -> None:
        """`data` and every chunk file, read whole, hold the model."""
        if self.mount is None:
            return  # before the first step
        got = os.pread(self._opened("data").fd, self.model.size("data") + 1, 0)
        assert_same_bytes(got, self.model.read("data"), f"{self.layout.name}: data",
                          self.model.itemsize)
        for index in np.ndindex(*self.layout.grid):
            got = os.pread(self._opened(index).fd, self.model.size(index) + 1, 0)
            assert_same_bytes(got, self.model.read(index),
                              f"{self.layout.name}: chunk file {self.layout.chunk_key(index)}",
                              self.model.itemsize)


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def test_mount_behaves_like_the_model(layout: Layout, tmp_path: Path) -> None:
    run_state_machine_as_test(lambda: MountMachine(layout, tmp_path), settings=MODEL_SETTINGS)

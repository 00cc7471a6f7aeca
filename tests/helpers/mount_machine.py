"""The Hypothesis state machine of tests/reliability/test_mount_model.py: it opens, reads and
writes the files of a mounted array exactly as a program would, and after every step checks
`data` and every chunk file against the model (tests/helpers/mount_model.py) byte for byte;
after every `fsync`, close and unmount, TensorStore's reading of the store.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import mmap
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import tensorstore as ts
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.helpers.mount_model import (
    MAX_WRITE,
    STATS,
    STEPS_BETWEEN_REMOUNTS,
    Layout,
    Model,
    assert_same_bytes,
    tensorstore_read,
)
from tests.helpers.mounting import Mount, mounted

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
        across it: short. (`data` grows instead: test_resize_grow.py; here it stays in bounds.)"""
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
        target = data.draw(self._chunks(), label="chunk")  # (data grows: test_resize_grow.py)
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
        libfuse 3.14 cannot let the kernel map shared (test_mount_writes.py checks they refuse it)."""
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

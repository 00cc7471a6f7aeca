"""`zarrfs import`: a new Zarr v3 array holding the elements of a raw file (or stdin).

RAW is streamed one slab at a time: one row of stored chunks (shards) along the slowest axis
of RAW's element order (the first for C, the last for F), so it may be far bigger than memory.
While the main thread reads the next slab, worker threads cut the current one into chunks,
byte-swap them, encode them (the compressors release the GIL) and store them; inner chunks of
shards are encoded in parallel too, then assembled. Chunks holding only the fill value are not
stored. The metadata is written last, so an interrupted import never looks like a complete
array; on any failure everything written is removed.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

import numpy as np

from ..array import partial_read_sharding
from ..array_metadata import write_new_document
from ..codecs import BytesLike, ChunkSpec, Pipeline, ShardingCodec, is_fill
from ..errors import ZarrfsError
from ..formats import ArrayDescription, discover
from ..grid import Box, Index
from ..store import SourceOptions, Store, open_store


def import_raw(raw: str, dest: str, options: SourceOptions, description: ArrayDescription, *,
               order: str = "C", endian: str = "little", jobs: int | None = None,
               progress: bool | None = None) -> int:
    """Import RAW ("-": stdin) into a new array at `dest`; returns how many chunks were stored."""
    need = description.nbytes
    with _open_raw(raw) as source:
        size = _regular_size(source)
        if size is not None and size != need:
            raise ZarrfsError(_size_problem(raw, size, need))
        with contextlib.closing(open_store(dest, options)) as store:
            if discover(store.get, "") is not None:
                raise ZarrfsError(f"{dest} already holds an array or group")
            existed = store.capabilities.local_files and os.path.exists(store.root)
            importer = _Importer(store, description, order, endian, jobs or os.cpu_count() or 2)
            try:
                importer.run(source, raw, progress)
                store.sync_directories(importer.written)
                write_new_document(store, description)
            except BaseException:
                _remove(store, importer.written, existed)
                raise
    return len(importer.written)


class _Importer:
    def __init__(self, store: Store, description: ArrayDescription, order: str, endian: str,
                 jobs: int) -> None:
        self.store = store
        self.description = description
        self.shape = description.shape
        self.chunk_shape = description.chunk_shape  # the stored unit: chunk or shard
        self.storage = description.data_type.storage
        self.fortran = order == "F"
        self.swap = description.data_type.itemsize > 1 and endian != sys.byteorder
        self.pipeline = Pipeline.build(description.codecs, ChunkSpec(
            description.chunk_shape, description.data_type, description.fill_value))
        self.sharding: ShardingCodec | None = partial_read_sharding(self.pipeline)
        self.jobs = jobs
        self.encoders = threading.BoundedSemaphore(jobs)  # chunks being cut and encoded at once
        self.written: list[str] = []

    def run(self, source: BinaryIO, name: str, progress: bool | None) -> None:
        from tqdm.auto import tqdm

        need = self.description.nbytes
        bar: Any = tqdm(total=need, unit="B", unit_scale=True, unit_divisor=1024, desc="import",
                        disable=None if progress is None else not progress, dynamic_ncols=True)
        slabs = list(self._slabs())
        largest = max((nbytes for _, _, nbytes in slabs), default=0)
        # Two buffers: the main thread reads one while the workers cut up the other.
        buffers = [bytearray(largest), bytearray(largest if len(slabs) > 1 else 0)]
        previous = consumed = 0
        # Puts wait on fsync: more threads than encoders, as the engine's write-back has.
        with bar, ThreadPoolExecutor(4 * self.jobs + 4, "zarrfs-import") as pool:
            pending: list[Job] = []
            try:
                for number, (start, stop, nbytes) in enumerate(slabs):
                    view = memoryview(buffers[number % 2])[:nbytes]
                    got = _read_into(source, view)
                    if got < nbytes:
                        raise ZarrfsError(_size_problem(name, consumed + got, need))
                    self._finish(pool, pending)  # the previous slab, encoded while this one was read
                    bar.update(previous)
                    pending = self._submit(pool, self._slab_array(view, start, stop), start)
                    previous = nbytes
                    consumed += nbytes
                self._finish(pool, pending)
                bar.update(previous)
                if source.read(1):
                    raise ZarrfsError(_size_problem(name, None, need))
            finally:
                for job in pending:
                    job.cancel()

    # -- slabs ---------------------------------------------------------------------------------

    def _slabs(self) -> Iterator[tuple[int, int, int]]:
        """(first, stop, nbytes) along the slab axis, in RAW's order."""
        if math.prod(self.shape) == 0:
            return
        if not self.shape:
            yield 0, 1, self.storage.itemsize
            return
        axis = self._axis
        plane = math.prod(self.shape) // self.shape[axis] * self.storage.itemsize
        step = self.chunk_shape[axis]
        for start in range(0, self.shape[axis], step):
            stop = min(start + step, self.shape[axis])
            yield start, stop, (stop - start) * plane

    @property
    def _axis(self) -> int:
        return len(self.shape) - 1 if self.fortran else 0

    def _slab_array(self, view: memoryview, start: int, stop: int) -> np.ndarray:
        flat = np.frombuffer(view, dtype=self.storage)
        if not self.shape:
            return flat.reshape(())
        shape = list(self.shape)
        shape[self._axis] = stop - start
        return flat.reshape(shape, order="F" if self.fortran else "C")

    def _submit(self, pool: ThreadPoolExecutor, slab: np.ndarray, start: int) -> list[Job]:
        """Start encoding every stored chunk of a slab."""
        ranges = [range(g) for g in self.description.grid_shape]
        if self.shape:
            ranges[self._axis] = range(start // self.chunk_shape[self._axis],
                                       start // self.chunk_shape[self._axis] + 1)
        origin = [0] * len(self.shape)
        if self.shape:
            origin[self._axis] = start
        futures: list[Job] = []
        for chunk in itertools.product(*ranges):
            if self.sharding is None:
                futures.append(pool.submit(self._store_chunk, slab, origin, chunk))
            else:
                futures.append(self._submit_shard(pool, slab, origin, chunk, self.sharding))
        return futures

    def _finish(self, pool: ThreadPoolExecutor, jobs: list[Job]) -> None:
        """Wait until a slab's chunks are stored. A shard is stored by a job submitted after
        every encoding job of the slab, so it waits only on jobs already running or done."""
        stores = [pool.submit(job.store) if isinstance(job, _ShardJob) else job for job in jobs]
        for future in stores:
            future.result()

    # -- chunks ----------------------------------------------------------------------------------

    def _cut(self, slab: np.ndarray, origin: list[int], box: Box, spec: ChunkSpec) -> np.ndarray:
        """The elements of `box` (padded with the fill value past the array) as a chunk."""
        inside = Box(box.start, tuple(min(b, s) for b, s in zip(box.stop, self.shape, strict=True)))
        out = np.empty(spec.shape, dtype=self.storage) if inside.shape == box.shape else spec.fill_array()
        # The trailing Ellipsis keeps rank-0 selections arrays, not scalars.
        to: tuple[Any, ...] = (*(slice(0, n) for n in inside.shape), Ellipsis)
        source: tuple[Any, ...] = (*inside.slices(origin), Ellipsis)
        target = out[to]
        target[...] = slab[source]
        if self.swap:
            target.byteswap(inplace=True)
        return out

    def _store_chunk(self, slab: np.ndarray, origin: list[int], chunk: Index) -> None:
        with self.encoders:
            values = self._cut(slab, origin, _box(chunk, self.chunk_shape), self.pipeline.chunk)
            if is_fill(values, self.description.fill_value):
                return
            data = self.pipeline.encode(values)
        self.put(chunk, data)

    def put(self, chunk: Index, data: BytesLike) -> None:
        key = self.description.chunk_key_encoding.key(chunk)
        self.written.append(key)  # before the put: a failed import removes it
        self.store.put(key, data, sync_directory=False)

    def _submit_shard(self, pool: ThreadPoolExecutor, slab: np.ndarray, origin: list[int], chunk: Index,
                      sharding: ShardingCodec) -> _ShardJob:
        job = _ShardJob(self, chunk, sharding)
        shard_origin = [c * s for c, s in zip(chunk, self.chunk_shape, strict=True)]
        for inner in sharding.inner_positions():
            start = tuple(o + i * c
                          for o, i, c in zip(shard_origin, inner, sharding.inner_shape, strict=True))
            if any(s >= n for s, n in zip(start, self.shape, strict=True)):
                continue  # wholly past the array's edge: fill value, not stored
            box = Box(start, tuple(s + c for s, c in zip(start, sharding.inner_shape, strict=True)))
            job.inner[inner] = pool.submit(self._encode_inner, slab, origin, box, sharding)
        return job

    def _encode_inner(self, slab: np.ndarray, origin: list[int], box: Box,
                      sharding: ShardingCodec) -> BytesLike | None:
        with self.encoders:
            return sharding.encode_inner(self._cut(slab, origin, box, sharding.inner.chunk))


class _ShardJob:
    """A shard whose inner chunks are being encoded; stored once they all are."""

    def __init__(self, importer: _Importer, chunk: Index, sharding: ShardingCodec) -> None:
        self.importer = importer
        self.chunk = chunk
        self.sharding = sharding
        self.inner: dict[Index, Future[BytesLike | None]] = {}

    def store(self) -> None:
        encoded = {inner: data for inner, future in self.inner.items()
                   if (data := future.result()) is not None}
        if encoded:
            self.importer.put(self.chunk, self.sharding.assemble(encoded))

    def cancel(self) -> None:
        for future in self.inner.values():
            future.cancel()


Job = Future[None] | _ShardJob


def _box(chunk: Index, shape: tuple[int, ...]) -> Box:
    start = tuple(c * s for c, s in zip(chunk, shape, strict=True))
    return Box(start, tuple(a + s for a, s in zip(start, shape, strict=True)))


def _read_into(source: BinaryIO, view: memoryview) -> int:
    """Fill `view` from `source`; fewer bytes only at its end."""
    got = 0
    while got < len(view):
        n = source.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            break
        got += n
    return got


@contextlib.contextmanager
def _open_raw(raw: str) -> Iterator[BinaryIO]:
    if raw == "-":
        yield sys.stdin.buffer
        return
    try:
        source = open(raw, "rb", buffering=0)  # noqa: SIM115 - closed below
    except OSError as e:
        raise ZarrfsError(f"{raw}: cannot open: {e.strerror or e}") from None
    with source:
        yield source


def _regular_size(source: BinaryIO) -> int | None:
    """The size of a regular file; None for pipes and terminals (checked while reading)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        info = os.fstat(source.fileno())
        import stat

        if stat.S_ISREG(info.st_mode):
            return info.st_size
    return None


def _size_problem(name: str, size: int | None, need: int) -> str:
    where = "standard input" if name == "-" else name
    held = f"more than {need}" if size is None else str(size)
    return f"{where} holds {held} bytes; shape x item size is {need} bytes"


def _remove(store: Store, written: list[str], existed: bool) -> None:
    """Undo a failed import: the destination directory if we made it, else what we wrote."""
    with contextlib.suppress(OSError, ZarrfsError):
        if store.capabilities.local_files and not existed:
            shutil.rmtree(store.root, ignore_errors=True)
            return
        for key in written:
            store.delete(key)
        if store.capabilities.local_files:
            for directory in sorted({os.path.dirname(store.path(k)) for k in written}, reverse=True):
                while directory.startswith(store.root + "/"):
                    try:
                        os.rmdir(directory)
                    except OSError:
                        break
                    directory = os.path.dirname(directory)

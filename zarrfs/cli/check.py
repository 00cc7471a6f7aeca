"""`zarrfs check`: decode every stored chunk of an array, or of every array of a group.

A store is sound when every chunk (every inner chunk of every shard, through a checked
shard index) decodes to a chunk of the right shape, every checksum codec agrees, every stored
key of an array is one of its metadata files or the key of a chunk inside its grid, and no
temporary file of an atomic put was left behind by a process that died.

Chunks are decoded on worker threads (the compressors release the GIL) with a bounded number
in flight, so memory stays at a few chunks per thread whatever the size of the store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..array import partial_read_sharding
from ..codecs import ChunkSpec, Pipeline, ShardingCodec
from ..errors import StoreError, ZarrfsError
from ..formats import ArrayDescription, NodeMetadata, children_of, discover, join_path
from ..store import TEMP_PREFIX, Store, one_line, temporary_owner_alive

# Metadata files any array directory may hold, besides those its node lists.
METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zmetadata", "meta", "attrs"})
# How many chunks may wait decoded or undecoded per worker thread.
IN_FLIGHT_PER_JOB = 2


@dataclass(frozen=True)
class Problem:
    key: str  # relative to the store's root
    text: str


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    arrays: int = 0
    chunks: int = 0
    nbytes: int = 0

    @property
    def sound(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class _Array:
    path: str
    node: NodeMetadata
    description: ArrayDescription
    pipeline: Pipeline

    def decode(self, store: Store, key: str) -> str | None:
        """What is wrong with the stored object `key`, or None."""
        data = store.get(key)
        if data is None:
            return None  # deleted while we checked: nothing stored, nothing wrong
        try:
            pipeline = self._pipeline(key)
            sharding = partial_read_sharding(pipeline)
            if sharding is not None:
                return _check_shard(sharding, data)
            pipeline.decode(data)
        except Exception as e:
            return one_line(e)
        return None

    def _pipeline(self, key: str) -> Pipeline:
        """The codecs of the chunk `key` (of a rectilinear grid: built for its own shape)."""
        description, grid = self.description, self.description.rectilinear
        index = description.chunk_key_encoding.parse(key[len(self.path) + 1:] if self.path else key,
                                                     description.rank)
        if grid is None or index is None:
            return self.pipeline
        spec = ChunkSpec(grid.chunk_shape(index), description.data_type, description.fill_value)
        return Pipeline.build(description.codecs, spec)


def check(store: Store, *, jobs: int | None = None, progress: bool | None = None) -> Report:
    """Check the array or group at the root of `store`. `progress`: None shows a bar when
    stderr is a terminal."""
    root = discover(store.get, "")
    if root is None:
        raise ZarrfsError(f"{store.path('')}: no Zarr array or group here")
    report = Report()
    arrays: dict[str, _Array] = {}
    for path, node, error in _walk(store, root):
        if error is not None:
            report.problems.append(Problem(path, f"cannot open: {error}"))
            continue
        report.arrays += 1
        opened = _open(node)
        if isinstance(opened, str):
            report.problems.append(Problem(join_path(path, node.files[0]), f"cannot open: {opened}"))
        else:
            arrays[path] = opened
    chunks = _classify(store, arrays, report)
    _decode_all(store, chunks, report, jobs or os.cpu_count() or 2, progress)
    report.problems.sort(key=lambda p: p.key)
    return report


def _walk(store: Store, root: NodeMetadata) -> Iterator[tuple[str, NodeMetadata, str | None]]:
    """Every array node below `root` (or `root` itself): (path, node, None), or for a child
    whose metadata cannot be read (path, root, reason)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.kind == "array":
            yield node.path, node, None
            continue
        for child, error in _children(store, node):
            if isinstance(child, NodeMetadata):
                stack.append(child)
            else:
                yield child, root, error


def _children(store: Store, group: NodeMetadata) -> Iterator[tuple[NodeMetadata | str, str | None]]:
    """A group's children, and the paths of those that cannot be read with the reason."""
    skipped: dict[str, str] = {}
    children = children_of(group, store.get, store.list_dirs, skipped)
    yield from ((child, None) for child in children.values())
    yield from skipped.items()


def _open(node: NodeMetadata) -> _Array | str:
    try:
        description = node.describe()
        pipeline = Pipeline.build(description.codecs, ChunkSpec(
            description.chunk_shape, description.data_type, description.fill_value))
    except ZarrfsError as e:
        return str(e)
    return _Array(node.path, node, description, pipeline)


def _classify(store: Store, arrays: dict[str, _Array], report: Report) -> list[tuple[_Array, str, int]]:
    """The stored chunks to decode, as (array, key, size); every other key of an array's
    directory and every stray temporary file is a problem."""
    chunks: list[tuple[_Array, str, int]] = []
    for key, size in _listing(store):
        name = key.rsplit("/", 1)[-1]
        if name.startswith(TEMP_PREFIX):
            if not temporary_owner_alive(name):
                report.problems.append(Problem(key, "stray temporary file of a process that is gone"))
            continue
        array = _owner(key, arrays)
        if array is None:
            continue  # group metadata, or the directory of an array reported as unopenable
        relative = key[len(array.path) + 1:] if array.path else key
        if relative in array.node.files or relative in METADATA_NAMES:
            continue
        description = array.description
        index = description.chunk_key_encoding.parse(relative, description.rank)
        if index is None:
            report.problems.append(Problem(key, "not a chunk key of this array"))
        elif any(i >= g for i, g in zip(index, description.grid_shape, strict=True)):
            grid = "x".join(map(str, description.grid_shape)) or "()"
            report.problems.append(Problem(key, f"chunk {list(index)} lies outside the chunk grid {grid}"))
        else:
            chunks.append((array, key, size))
    return chunks


def _decode_all(store: Store, chunks: list[tuple[_Array, str, int]], report: Report, jobs: int,
                progress: bool | None) -> None:
    from tqdm.auto import tqdm

    total = sum(size for _, _, size in chunks)
    bar: Any = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="check",
                    disable=None if progress is None else not progress, dynamic_ncols=True)
    pending: dict[Future[str | None], tuple[str, int]] = {}

    def collect(block: bool) -> None:
        done, _ = wait(pending, return_when=FIRST_COMPLETED) if block else (
            [f for f in pending if f.done()], None)
        for future in done:
            key, size = pending.pop(future)
            problem = future.result()
            if problem is not None:
                report.problems.append(Problem(key, problem))
            report.chunks += 1
            report.nbytes += size
            bar.update(size)
        bar.set_postfix_str(f"{report.chunks}/{len(chunks)} chunks", refresh=False)

    with bar, ThreadPoolExecutor(jobs, "zarrfs-check") as pool:
        try:
            for array, key, size in chunks:
                while len(pending) >= jobs * IN_FLIGHT_PER_JOB:
                    collect(block=True)
                pending[pool.submit(array.decode, store, key)] = (key, size)
            while pending:
                collect(block=True)
        finally:
            for future in pending:
                future.cancel()


def _check_shard(sharding: ShardingCodec, shard: bytes) -> str | None:
    """Check a shard's index (its size, entries inside the shard, no overlaps), then decode
    each inner chunk it lists."""
    if len(shard) < sharding.index_nbytes:
        return f"shard of {len(shard)} bytes is shorter than its index ({sharding.index_nbytes} bytes)"
    view = memoryview(shard)
    span = sharding.index_span(len(shard))
    try:
        index = sharding.decode_index(view[span.offset : span.end], len(shard))
    except Exception as e:
        text = one_line(e)
        return text if text.startswith("shard index") else f"shard index: {text}"
    bad: list[str] = []
    for inner in sharding.inner_positions():
        where = index.span(inner)
        if where is None:
            continue
        try:
            sharding.decode_inner(view[where.offset : where.end])
        except Exception as e:
            bad.append(f"inner chunk {list(inner)}: {one_line(e)}")
    if not bad:
        return None
    return bad[0] + (f" (and {len(bad) - 1} more inner chunks)" if len(bad) > 1 else "")


def _listing(store: Store) -> list[tuple[str, int]]:
    """Every stored key with its size, temporary files included (Store.list hides them); a
    failure names the store's root."""
    try:
        return sorted(store.sizes().items())
    except StoreError as e:
        raise type(e)(store.root, e.problem, e.errno) from None
    except Exception as e:
        raise StoreError(store.root, one_line(e)) from None


def _owner(key: str, arrays: dict[str, _Array]) -> _Array | None:
    """The array whose directory holds `key` (arrays never hold other nodes)."""
    directory = key
    while "/" in directory:
        directory = directory.rsplit("/", 1)[0]
        if directory in arrays:
            return arrays[directory]
    return arrays.get("")



"""Remote reads of sharded arrays shaped for latency: which byte ranges are merged into one
request (zarrfs.store.ranges), and, against a moto S3 server behind a delaying proxy (GETs
counted there), that a whole read of a sharded array costs about one GET per shard, that a
read of part of a shard merges its inner chunks into few requests, and that missing inner
chunks and missing shards read as the fill value — all equal to zarr-python's reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.mounting import MountFactory
from tests.helpers.netproxy import TcpProxy, proxied
from tests.helpers.s3_server import S3Server, free_port, serving
from zarrfs.array_metadata import open_array
from zarrfs.codecs import ChunkSpec, ShardingCodec
from zarrfs.formats.description import CodecSpec
from zarrfs.formats.dtypes import CORE_TYPES
from zarrfs.grid import Box
from zarrfs.store import SourceOptions, Store
from zarrfs.store.ranges import REMOTE_GAP, RangeRequest, merge, worth_whole

zarr = pytest.importorskip("zarr")

# -- merging ranges ---------------------------------------------------------------------------


def spans(requests: list[RangeRequest]) -> list[tuple[int, int, list[int]]]:
    return [(r.start, r.stop, r.members) for r in requests]


def test_adjacent_ranges_merge_and_gaps_split_by_default() -> None:
    ranges = [(10, 20), (0, 10), (30, 40), (40, 45)]
    assert spans(merge(ranges)) == [(0, 20, [1, 0]), (30, 45, [2, 3])]


def test_small_gaps_merge_remotely() -> None:
    ranges = [(0, 100), (100 + REMOTE_GAP, 200 + REMOTE_GAP), (300 + 3 * REMOTE_GAP, 400 + 3 * REMOTE_GAP)]
    assert spans(merge(ranges, max_gap=REMOTE_GAP)) == [
        (0, 200 + REMOTE_GAP, [0, 1]), (300 + 3 * REMOTE_GAP, 400 + 3 * REMOTE_GAP, [2])]


def test_gap_as_a_fraction_of_what_is_wanted() -> None:
    # 8 MiB wanted, then a 4 MiB gap: worth reading at a fraction of 1, not at 0.25.
    ranges = [(0, 8 << 20), (12 << 20, 13 << 20)]
    assert len(merge(ranges, max_gap=REMOTE_GAP, gap_fraction=1.0)) == 1
    assert len(merge(ranges, max_gap=REMOTE_GAP, gap_fraction=0.25)) == 2


def test_max_bytes_bounds_a_request_but_not_a_single_range() -> None:
    ranges = [(0, 10), (10, 20), (20, 30), (30, 100)]
    assert spans(merge(ranges, max_bytes=20)) == [(0, 20, [0, 1]), (20, 30, [2]), (30, 100, [3])]


def test_nothing_to_merge() -> None:
    assert merge([]) == []
    assert not worth_whole([], 100)


def test_whole_object_when_most_of_it_is_wanted() -> None:
    size = 64 << 20
    assert worth_whole(merge([(0, 10 << 20), (20 << 20, 45 << 20)]), size)
    assert not worth_whole(merge([(0, 10 << 20), (20 << 20, 25 << 20)]), size)
    # several requests of a small object: one is cheaper
    assert worth_whole(merge([(0, 10), (5000, 5010)]), 8000)
    assert not worth_whole(merge([(0, 10)]), 8000)


def test_a_shard_index_keeps_no_view_of_the_shard() -> None:
    # Shards read from S3 are views of obstore's buffers: an index decoded as a view of one
    # (and cached) kept the whole shard alive, a cold read held every shard it read.
    config = {"chunk_shape": [4, 4], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                                {"name": "zstd", "configuration": {"level": 1}}],
              "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}
    codec = ShardingCodec.from_spec(CodecSpec("sharding_indexed", config, "codecs[0]"),
                                    ChunkSpec((8, 8), CORE_TYPES["uint16"], b"\0\0"))
    shard = bytearray(codec.encode(np.arange(64, dtype="<u2").reshape(8, 8)))
    span = codec.index_span(len(shard))
    index = codec.decode_index(memoryview(shard)[span.offset : span.end], len(shard))
    shard.extend(b"more")  # (a BufferError while anything still views the shard)
    found = index.span((1, 1))
    assert found is not None
    inner = codec.decode_inner(shard[found.offset : found.end])
    assert np.array_equal(inner, np.arange(64).reshape(8, 8)[4:, 4:])


# -- against S3 behind a proxy ----------------------------------------------------------------

SHAPE = (1024, 4096)  # uint16: 8 MiB
SHARD = (256, 1024)  # 512 KiB decoded: fetched whole at first touch
INNER = (64, 128)  # 16 KiB: 4 x 8 inner chunks a shard
BIG_SHARD = (512, 8192)  # 8 MiB: not small, 8 x 64 inner chunks
BIG_SHAPE = (1024, 8192)
VALUES = ((np.arange(np.prod(SHAPE), dtype=np.uint32) * 7) % 60000 + 1).astype("<u2").reshape(SHAPE)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


@pytest.fixture
def proxy(server: S3Server) -> Iterator[TcpProxy]:
    with proxied(server.port, delay=0.005) as running:
        yield running


def options(server: S3Server, endpoint: str | None = None) -> dict[str, str]:
    return {"endpoint_url": endpoint or server.endpoint_url, "key": "testing", "secret": "testing"}


def write_sharded(server: S3Server, name: str, values: np.ndarray, shards: tuple[int, int]) -> None:
    array = zarr.create_array(store=f"s3://{server.bucket}/{name}", shape=values.shape, shards=shards,
                              chunks=INNER, dtype="<u2", fill_value=0,
                              compressors=zarr.codecs.ZstdCodec(level=1), storage_options=options(server))
    array[...] = values


def with_holes(values: np.ndarray) -> np.ndarray:
    """Shard (1, 1) missing, inner chunks of shard (0, 0) missing (all fill value)."""
    out = values.copy()
    out[SHARD[0] : 2 * SHARD[0], SHARD[1] : 2 * SHARD[1]] = 0
    out[0 : INNER[0], 0 : 3 * INNER[1]] = 0
    out[2 * INNER[0] : 3 * INNER[0], INNER[1] : 2 * INNER[1]] = 0
    return out


def stored_shards(server: S3Server, name: str) -> int:
    import s3fs

    fs = s3fs.S3FileSystem(**{k: v for k, v in options(server).items() if k != "endpoint_url"},
                           client_kwargs={"endpoint_url": server.endpoint_url}, skip_instance_cache=True)
    return len([p for p in fs.find(f"{server.bucket}/{name}") if "/c/" in p])


def test_a_whole_read_costs_about_one_get_per_shard(server: S3Server, proxy: TcpProxy,
                                                   mount_array: MountFactory) -> None:
    expected = with_holes(VALUES)
    write_sharded(server, "holes", expected, SHARD)
    shards = stored_shards(server, "holes")
    assert shards == (SHAPE[0] // SHARD[0]) * (SHAPE[1] // SHARD[1]) - 1
    mount = mount_array(f"s3://{server.bucket}/holes", [f"endpoint_url={proxy.url}"])
    before = proxy.requests
    data = np.frombuffer(mount.data.read_bytes(), "<u2").reshape(SHAPE)
    sent = proxy.requests - before
    assert np.array_equal(data, expected)
    stored = zarr.open_array(f"s3://{server.bucket}/holes", mode="r", storage_options=options(server))
    assert np.array_equal(data, stored[...])
    # one GET a stored shard; the missing one costs a failed GET (and a retry of it at most)
    assert shards + 1 <= sent <= shards + 3, sent


def test_part_of_a_shard_is_read_with_merged_ranges(server: S3Server, proxy: TcpProxy) -> None:
    values = ((np.arange(np.prod(BIG_SHAPE), dtype=np.uint32) * 3) % 50000 + 1).astype("<u2")
    values = values.reshape(BIG_SHAPE)
    write_sharded(server, "big", values, BIG_SHARD)
    array = open_array(Store.open(f"s3://{server.bucket}/big",
                                  SourceOptions(client=options(server, proxy.url))))
    try:
        per_row = BIG_SHARD[1] // INNER[1]
        first_row = [(0, j) for j in range(per_row)]
        (fetched,) = array.fetch([(0, 0)])  # the index is read (a HEAD and a GET) and one chunk
        assert fetched.data is not None
        assert np.array_equal(fetched.data, values[: INNER[0], : INNER[1]])
        # Two rows of inner chunks of the same shard (zarr-python lays them out in Morton
        # order: rows are not contiguous), 128 of its 512 inner chunks: one request.
        units = first_row + [(1, j) for j in range(per_row)]
        before = proxy.requests
        fetched_all = list(array.fetch(units))
        sent = proxy.requests - before
        assert sent == 1, sent
        for (i, j), found in zip(units, fetched_all, strict=True):
            block = values[i * INNER[0] : (i + 1) * INNER[0], j * INNER[1] : (j + 1) * INNER[1]]
            assert found.data is not None and np.array_equal(found.data, block)
    finally:
        array.close()


def test_missing_inner_chunks_and_shards_read_as_fill(server: S3Server, proxy: TcpProxy) -> None:
    expected = with_holes(VALUES)
    write_sharded(server, "holes", expected, SHARD)
    array = open_array(Store.open(f"s3://{server.bucket}/holes",
                                  SourceOptions(client=options(server, proxy.url))))
    try:
        per_shard = [(i, j) for i in range(SHARD[0] // INNER[0]) for j in range(SHARD[1] // INNER[1])]
        for shard in [(0, 0), (1, 1)]:
            units = [(shard[0] * 4 + i, shard[1] * 8 + j) for i, j in per_shard]
            before = proxy.requests
            for (i, j), found in zip(units, array.fetch(units), strict=True):
                block = expected[i * INNER[0] : (i + 1) * INNER[0], j * INNER[1] : (j + 1) * INNER[1]]
                data = array.fill_chunk if found.data is None else found.data
                assert np.array_equal(data, block), (i, j)
            assert proxy.requests - before <= 2  # the shard whole (or its absence, retried once)
    finally:
        array.close()


def test_reads_equal_a_plain_read_of_the_local_copy(server: S3Server, tmp_path: Path) -> None:
    """The same array read locally (adjacent ranges only) and remotely (merged) agree."""
    expected = with_holes(VALUES)
    write_sharded(server, "holes", expected, SHARD)
    local = zarr.create_array(store=str(tmp_path / "local"), shape=SHAPE, shards=SHARD, chunks=INNER,
                              dtype="<u2", fill_value=0, compressors=zarr.codecs.ZstdCodec(level=1))
    local[...] = expected
    remote = Store.open(f"s3://{server.bucket}/holes", SourceOptions(client=options(server)))
    for store in (Store.open(str(tmp_path / "local")), remote):
        array = open_array(store)
        try:
            assert np.array_equal(array.read(Box((0, 0), SHAPE)), expected)
        finally:
            array.close()



def test_shards_below_are_fetched_early_and_once(server: S3Server, proxy: TcpProxy,
                                                 mount_array: MountFactory) -> None:
    """A sequential reader's next row of shards is fetched while it reads the row before
    (ShardReader.read_early): each shard is still fetched once, read whole."""
    shape, shards = (2048, 1024), (256, 512)  # 8 rows of 2 shards, 256 KiB each
    values = np.random.default_rng(3).integers(0, 60000, shape, dtype="<u2")
    write_sharded(server, "rows", values, shards)
    mount = mount_array(f"s3://{server.bucket}/rows", [f"endpoint_url={proxy.url}"])
    before = proxy.requests
    data = np.frombuffer(mount.data.read_bytes(), "<u2").reshape(shape)
    sent = proxy.requests - before
    assert np.array_equal(data, values)
    count = (shape[0] // shards[0]) * (shape[1] // shards[1])
    assert count <= sent <= count + 1, sent  # (one request besides the shards, as before)

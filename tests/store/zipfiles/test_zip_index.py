"""The zip store's parts without FUSE (issue 41, item 1): what opening an archive and reading
its entries cost in ranged reads, local headers longer than the central directory says,
damaged archives as typed errors, which sources are zips, and where the Zarr root is."""

from __future__ import annotations

import io
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.zip_fixtures import ome_image, ozx
from zarrfs.errors import StoreError
from zarrfs.store.zipfiles import index as zip_index
from zarrfs.store.zipfiles import spans as zip_spans
from zarrfs.store.zipfiles.filesystem import ZippedFileSystem, ZipSource
from zarrfs.store.zipfiles.index import ZipIndex

pytestmark = pytest.mark.fast


class CountedReads:
    """An archive's bytes read by ranges, each read recorded as (start, length)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.reads: list[tuple[int, int]] = []

    def __call__(self, start: int, length: int) -> bytes:
        self.reads.append((start, length))
        return self.data[start : start + length]

    def opened(self) -> ZipIndex:
        return ZipIndex.open("test.zip", len(self.data), self)


def archive(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED, **options: object) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method, **options) as z:  # type: ignore[arg-type]
        for name, content in members.items():
            z.writestr(name, content)
    return buffer.getvalue()


def test_a_small_archive_opens_with_one_read_and_an_entry_costs_one() -> None:
    reads = CountedReads(archive({"zarr.json": b"{}", "c/0": b"x" * 5000}))
    index = reads.opened()
    assert len(reads.reads) == 1 and set(index.entries) == {"zarr.json", "c/0"}
    assert index.read("c/0") == b"x" * 5000 and len(reads.reads) == 2
    assert index.read("c/0", 10, 20) == b"x" * 10  # (deflated: the entry inflated again)


def test_a_large_central_directory_is_one_more_read() -> None:
    members = {f"c/{i}/{j}": bytes([i % 256, j % 256]) * 32 for i in range(64) for j in range(64)}
    data = archive(members, zipfile.ZIP_STORED)
    reads = CountedReads(data)
    index = reads.opened()
    assert len(data) > 2 * zip_index.TAIL_BYTES and len(reads.reads) == 2
    with zipfile.ZipFile(io.BytesIO(data)) as z:  # (no byte of the central directory read twice)
        central_directory = len(data) - z.infolist()[-1].header_offset - 30 - 7 - 64 - 22
    assert len(index.entries) == 4096 and sum(n for _, n in reads.reads) == central_directory + 22
    assert index.read("c/5/7") == bytes([5, 7]) * 32 and len(reads.reads) == 3


def test_stored_byte_ranges_read_only_the_range_once_the_header_is_known() -> None:
    content = bytes(range(256)) * 64
    reads = CountedReads(archive({"shard": content}, zipfile.ZIP_STORED))
    index = reads.opened()
    assert index.read("shard", 1000, 1010) == content[1000:1010]
    assert len(reads.reads) == 3  # (the tail, the local header, the range)
    assert index.read("shard", 5000, 5100) == content[5000:5100]
    assert reads.reads[-1][1] == 100 and len(reads.reads) == 4
    assert index.read("shard", 16000, 99999) == content[16000:]


def test_a_local_header_longer_than_the_margin_costs_a_second_read(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # force_zip64 puts a ZIP64 extra field in each local header only: the central
    # directory's lengths understate where the data starts.
    zipped = ozx(ome_image(tmp_path / "cells.ome.zarr"), tmp_path / "cells.ozx")
    monkeypatch.setattr(zip_index, "HEADER_MARGIN", 0)
    reads = CountedReads(zipped.read_bytes())
    index = reads.opened()
    with zipfile.ZipFile(zipped) as z:
        expected = z.read("0/zarr.json")
    assert index.read("0/zarr.json") == expected and len(reads.reads) == 3
    assert index.read("0/zarr.json") == expected and len(reads.reads) == 4  # (the start is known)


@pytest.mark.parametrize("damage", ["not a zip", "truncated", "no end record"])
def test_damaged_archives_are_a_store_error(damage: str) -> None:
    good = archive({"zarr.json": b"{}"})
    data = {"not a zip": b"PK\x03\x04" + b"junk" * 100, "truncated": good[: len(good) // 2],
            "no end record": good[:-22]}[damage]
    with pytest.raises(StoreError, match="not a readable zip archive"):
        CountedReads(data).opened()


def test_damaged_entries_are_a_store_error_naming_the_key() -> None:
    data = bytearray(archive({"c/0": bytes(1000)}))
    index = CountedReads(bytes(data)).opened()
    start = index.entries["c/0"].header_offset + 30 + 3
    data[start : start + 4] = b"\xff\xff\xff\xff"
    with pytest.raises(StoreError, match="c/0"):
        CountedReads(bytes(data)).opened().read("c/0")
    bzip = CountedReads(archive({"c/0": b"abc"}, zipfile.ZIP_BZIP2)).opened()
    with pytest.raises(StoreError, match="compression method 12"):
        bzip.read("c/0")
    moved = bytearray(archive({"c/0": b"abc"}, zipfile.ZIP_STORED))
    moved[0:4] = b"XXXX"  # (no local header where the central directory points)
    with pytest.raises(StoreError, match="no local file header"):
        CountedReads(bytes(moved)).opened().read("c/0")


def test_which_sources_are_zips(tmp_path: Path) -> None:
    (tmp_path / "a.zip").write_bytes(b"")
    (tmp_path / "folder.zip").mkdir()
    assert ZipSource.parse(str(tmp_path / "a.zip")) == ZipSource(str(tmp_path), "a.zip")
    assert ZipSource.parse(str(tmp_path / "folder.zip")) is None  # (a directory store)
    assert ZipSource.parse(str(tmp_path / "a.zarr")) is None
    assert ZipSource.parse("s3://b/x/cells.ome.zarr.zip") == ZipSource("s3://b/x", "cells.ome.zarr.zip")
    assert ZipSource.parse("https://host/image.OZX") == ZipSource("https://host", "image.OZX")
    assert ZipSource.parse("zip::gs://b/data.bin") == ZipSource("gs://b", "data.bin")
    assert ZipSource.parse("zip://cells/0::s3://b/c.zip") == ZipSource("s3://b", "c.zip", "cells/0")
    assert ZipSource.parse("s3://bucket/store.zarr") is None


@pytest.mark.parametrize(("names", "root"), [
    (["zarr.json", "a/zarr.json", "a/c/0"], ""),
    ([".zgroup", "a/.zarray"], ""),
    (["cells.ome.zarr/zarr.json", "cells.ome.zarr/0/zarr.json", "README.txt"], "/cells.ome.zarr"),
    (["top/inner.zarr/.zarray", "top/inner.zarr/0.0"], "/top/inner.zarr"),
    (["a.zarr/zarr.json", "b.zarr/zarr.json"], ""),  # (two stores: the top, as a hierarchy)
])
def test_the_zarr_root_is_the_folder_nearest_the_top_holding_metadata(names: list[str], root: str) -> None:
    fs = ZippedFileSystem(CountedReads(archive(dict.fromkeys(names, b"{}"))).opened())
    assert fs.zarr_root(None) == root


def test_listings_and_sizes_come_from_the_central_directory() -> None:
    reads = CountedReads(archive({"g/zarr.json": b"{}", "g/a/zarr.json": b"{ }", "g/a/c/0/0": b"1234"}))
    fs = ZippedFileSystem(reads.opened())
    before = len(reads.reads)
    assert fs.find("/g/a") == ["/g/a/c/0/0", "/g/a/zarr.json"]
    assert [e["name"] for e in fs.ls("/g", detail=True)] == ["/g/a", "/g/zarr.json"]
    assert fs.info("/g/a/c/0/0")["size"] == 4 and fs.info("/g/a")["type"] == "directory"
    with pytest.raises(FileNotFoundError):
        fs.info("/g/b")
    with pytest.raises(FileNotFoundError, match="no folder"):
        fs.zarr_root("nowhere")
    assert len(reads.reads) == before
    assert fs.cat_file("/g/a/c/0/0", start=1, end=3) == b"23"


def test_names_that_cannot_be_keys_are_left_out() -> None:
    names = ["zarr.json", "dir/", "a//b", "./c", "../d", "e/../f", "g/h"]
    index = CountedReads(archive(dict.fromkeys(names, b"{}"))).opened()
    assert set(index.entries) == {"zarr.json", "g/h"}
    assert ZippedFileSystem(index).ls("", detail=False) == ["/g", "/zarr.json"]


def test_sizes_claimed_past_the_end_of_the_archive_read_no_more_than_it_holds() -> None:
    data = bytearray(archive({"c/0": b"abc" * 100}, zipfile.ZIP_STORED))
    central = data.rfind(b"PK\x01\x02")
    data[central + 20 : central + 28] = (0xFFFFFFF0).to_bytes(4, "little") * 2  # (both sizes)
    reads = CountedReads(bytes(data))
    index = reads.opened()
    assert index.entries["c/0"].size == 0xFFFFFFF0
    with pytest.raises(StoreError, match="archive ends inside this entry"):
        index.read("c/0")
    with pytest.raises(StoreError, match="archive ends inside this entry"):
        index.read("c/0", 1 << 20, 2 << 20)
    assert all(start + length <= len(data) for start, length in reads.reads)


def test_a_remote_archives_neighbouring_entries_come_in_one_read() -> None:
    members = {f"c/0/{j}": bytes([j]) * 2048 for j in range(200)}
    data = archive(members, zipfile.ZIP_STORED)
    reads = CountedReads(data)
    index = ZipIndex.open("test.zip", len(data), reads, with_neighbours=True)
    opened = len(reads.reads)
    for j in range(200):
        assert index.read(f"c/0/{j}") == bytes([j]) * 2048
    spans = reads.reads[opened:]
    # (440 KB of entries: two reads of at most SPAN_BYTES, no byte read twice but the margins)
    assert len(spans) == 2 and all(length <= zip_spans.SPAN_BYTES for _, length in spans), spans
    assert sum(length for _, length in spans) < len(data)
    assert index.read("c/0/7") == bytes([7]) * 2048  # (taken already: read again, alone)
    assert len(reads.reads) == opened + len(spans) + 1


def test_many_threads_reading_a_row_of_entries_share_a_few_reads() -> None:
    members = {f"c/3/{j}": bytes([j]) * 2048 for j in range(128)}
    data = archive(members, zipfile.ZIP_DEFLATED)
    reads = CountedReads(data)
    index = ZipIndex.open("test.zip", len(data), reads, with_neighbours=True)
    opened = len(reads.reads)
    with ThreadPoolExecutor(32) as pool:
        found = list(pool.map(index.read, members))
    assert found == list(members.values())
    assert len(reads.reads) - opened < 32


def test_a_failed_read_fails_the_entries_waiting_for_it() -> None:
    data = archive({f"c/{j}": bytes(100) for j in range(10)}, zipfile.ZIP_STORED)
    failing = {"now": False}

    def read_range(start: int, length: int) -> bytes:
        if failing["now"]:
            raise StoreError("test.zip", "no answer")
        return data[start : start + length]

    index = ZipIndex.open("test.zip", len(data), read_range, with_neighbours=True)
    failing["now"] = True
    with pytest.raises(StoreError, match="no answer"):
        index.read("c/0")
    failing["now"] = False
    assert index.read("c/1") == bytes(100)  # (its span failed: read again, and it answers)


def test_an_entry_larger_than_a_span_is_read_alone_and_not_kept() -> None:
    big = bytes(range(256)) * (zip_spans.SPAN_BYTES // 256 + 1)
    data = archive({"shard": big, "after": b"x"}, zipfile.ZIP_STORED)
    reads = CountedReads(data)
    index = ZipIndex.open("test.zip", len(data), reads, with_neighbours=True)
    assert index.read("shard") == big and index.read("after") == b"x"
    assert reads.reads[-2][1] < len(big) + 1024 and reads.reads[-1][1] < 1024  # (two reads)


class Unseekable(io.RawIOBase):
    """A stream zipfile cannot seek back in: it writes each entry's sizes after its data
    (a data descriptor), as streaming writers do, and zeros in the local header."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.written += bytes(data)
        return len(data)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_entries_written_as_a_stream_with_data_descriptors(method: int) -> None:
    stream = Unseekable()
    with zipfile.ZipFile(stream, "w", method) as z:
        for name, content in {"zarr.json": b"{}", "c/0": bytes(range(256)) * 8}.items():
            with z.open(name, "w") as entry:
                entry.write(content)
    data = bytes(stream.written)
    assert zipfile.ZipFile(io.BytesIO(data)).getinfo("c/0").flag_bits & 0x8  # (a descriptor)
    for neighbours in (False, True):
        index = ZipIndex.open("test.zip", len(data), CountedReads(data), with_neighbours=neighbours)
        assert index.read("c/0") == bytes(range(256)) * 8 and index.read("zarr.json") == b"{}"


def test_a_zip_made_on_a_mac_finds_the_store_beside_macosx() -> None:
    names = ["cells.ome.zarr/zarr.json", "cells.ome.zarr/0/zarr.json",
             "__MACOSX/cells.ome.zarr/._zarr.json", "__MACOSX/._cells.ome.zarr"]
    fs = ZippedFileSystem(CountedReads(archive(dict.fromkeys(names, b"{}"))).opened())
    assert fs.zarr_root(None) == "/cells.ome.zarr"


@pytest.mark.parametrize(("given", "insists"), [([], False), (["rw"], True), (["rw,ro"], False),
                                                (["ro", "rw"], True), (["defaults"], False)])
def test_only_an_explicit_rw_insists_on_writing(given: list[str], insists: bool) -> None:
    from zarrfs.options import MountOptions

    assert MountOptions.parse(given).read_write is insists

"""A big listing through `zarrfs serve`: PROPFIND with Depth 1 of `chunks/` of an array of
10^5 chunks (the largest the suite affords in seconds; a chunk file's name and size come from
the grid, so what is stored changes nothing of the listing's cost: benchmarks/serve.py lists
10^6 stored chunks). The answer is streamed a member at a time: the server's memory grows by
far less than the listing (50 MB of XML; WsgiDAV's own PROPFIND, which holds it all as a
tree of elements, grew by 376 MiB), measured in /proc while curl reads it; and it lists what a
mount lists: the same names, the same sizes."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import mounted
from tests.helpers.serving import Server, curl, served

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)

CHUNKS = 100_000
LENGTH = 4 * CHUNKS - 2  # (the last chunk an edge)
NAMED = ('<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/>'
         "</D:prop></D:propfind>")  # (what rclone and davfs2 ask, in part: a body to read)
FILE = re.compile(rb"<(?:\w+:)?href>([^<]*)</(?:\w+:)?href>.*<(?:\w+:)?getcontentlength>(\d+)<", re.S)


def rss(pid: int) -> int:
    """The process's resident memory, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no VmRSS for {pid}")


def peak_rss_while(server: Server, *args: str, out: Path) -> tuple[int, int]:
    """(the server's RSS before, its peak) while curl makes the request, its answer in `out`."""
    pid = server.process.pid
    before, peak = rss(pid), 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss(pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        got = curl("-o", str(out), "-w", "%{http_code}", *args, timeout=600)
    finally:
        done.set()
        watcher.join()
    assert got.stdout == b"207", got
    return before, peak


def test_a_propfind_of_a_big_chunks_directory_is_streamed_and_lists_as_a_mount(tmp_path: Path) -> None:
    path = tmp_path / "long.zarr"
    written = zarr.create_array(path, shape=(LENGTH,), chunks=(4,), dtype="<u2", fill_value=0,
                                compressors=None, chunk_key_encoding={"name": "v2", "separator": "."})
    written[:400] = np.arange(400, dtype="<u2")  # (a hundred chunks stored; the rest are the fill value's)
    (tmp_path / "srv").mkdir()
    # (a client timeout shorter than the answer takes: the deadline of a request is its reading's)
    with served(path, tmp_path / "srv", ["ro"], ["--client-timeout", "3"]) as server:
        propfind = ["-X", "PROPFIND", "-H", "Depth: 1"]
        peak_rss_while(server, *propfind, server.url, out=tmp_path / "root.xml")  # (threads, arenas: warm)
        before, peak = peak_rss_while(server, *propfind, server.url + "chunks/", out=tmp_path / "chunks.xml")
        peak_rss_while(server, *propfind, "--data", NAMED, server.url + "chunks/", out=tmp_path / "named.xml")
    listing = (tmp_path / "chunks.xml").read_bytes()
    assert listing.count(b"response>") == (tmp_path / "named.xml").read_bytes().count(b"response>")
    grown = peak - before
    print(f"PROPFIND of {CHUNKS} chunk files: {len(listing) >> 20} MiB of XML, the server's RSS "
          f"{before >> 20} -> {peak >> 20} MiB")
    assert grown < len(listing) // 5, f"the server grew by {grown >> 20} MiB for {len(listing) >> 20} MiB"
    found = (FILE.search(response) for response in listing.split(b"response>"))  # (one file a response)
    members = {file[1].decode().rsplit("/", 1)[-1]: int(file[2]) for file in found if file is not None}
    assert len(members) == CHUNKS
    with mounted(path, tmp_path / "mnt", ["ro"]) as mount:
        names = os.listdir(mount.path / "chunks")
        assert sorted(names) == sorted(members)
        sample = [*map(str, range(0, CHUNKS, 997)), str(CHUNKS - 1)]
        assert {name: (mount.path / "chunks" / name).stat().st_size for name in sample} == \
            {name: members[name] for name in sample}
    assert set(members.values()) == {8}  # (4 elements of 2 bytes: the edge chunk's file too)

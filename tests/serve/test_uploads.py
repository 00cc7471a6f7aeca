"""PUTs through `zarrfs serve -o rw` as trusted servers take them: the ETag a PUT answers is
the stored file's (the next GET's and HEAD's); a chunked body (Finder's, with
X-Expected-Entity-Length and no Content-Length) is stored, and one shorter than it said
changes nothing; a PUT cut off (the client gone half-way, or silent until the body's
deadline) leaves the array exactly as it was (read through the server and, once it stopped,
with zarr-python); of two PUTs with one If-Match (to one file, or to `data` and `data.npy`
of one array), exactly one is written and the other is 412; a PUT of 0 bytes to `data`
changes nothing."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.serving import Server, curl, group_of_one, headers_of, served, status_of
from tests.helpers.webdav_requests import cut_put, wait_for

SHAPE = (1024, 512)  # (2 MiB of int32: staged past the bound in memory, on disk)
VALUES = np.arange(np.prod(SHAPE), dtype="<i4").reshape(SHAPE)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return group_of_one(tmp_path, "a", VALUES, (256, 256))


@pytest.fixture
def server(tree: Path, tmp_path: Path) -> Iterator[Server]:
    with served(tree, tmp_path, ["rw"], ["--client-timeout", "3"]) as running:
        yield running


def stored(tree: Path) -> np.ndarray:
    return np.asarray(zarr.open_array(tree / "a", mode="r")[...])


def body_file(tmp_path: Path, values: np.ndarray, name: str = "body") -> Path:
    (tmp_path / name).write_bytes(values.tobytes())
    return tmp_path / name


@pytest.mark.fast
def test_a_put_answers_the_etag_of_what_it_stored(server: Server, tmp_path: Path) -> None:
    url = server.url + "a/data"
    before = headers_of(url)["etag"]
    put = headers_of("-T", str(body_file(tmp_path, -VALUES)), url)
    assert put[":status"] == "204" and put["etag"] != before
    assert headers_of(url)["etag"] == put["etag"]
    assert headers_of("-I", url)["etag"] == put["etag"]
    assert status_of("-H", f"If-None-Match: {put['etag']}", url) == 304


def test_a_chunked_put_is_stored_and_a_short_one_changes_nothing(server: Server, tree: Path,
                                                                 tmp_path: Path) -> None:
    url = server.url + "a/data"
    body = body_file(tmp_path, -VALUES)
    size = body.stat().st_size
    chunked = ["-T", str(body), "-H", "Transfer-Encoding: chunked"]
    assert status_of(*chunked, "-H", f"X-Expected-Entity-Length: {size}", url) == 204
    assert np.array_equal(stored(tree), -VALUES)
    assert status_of(*chunked, url) == 204  # (chunked, no length said: as it comes)
    short = body_file(tmp_path, VALUES[:100], "short")  # (whole rows: only its length is wrong)
    done = status_of("-T", str(short), "-H", "Transfer-Encoding: chunked", "-H",
                     f"X-Expected-Entity-Length: {size}", url)
    assert done == 409
    assert np.array_equal(stored(tree), -VALUES)
    assert curl(url).stdout == (-VALUES).tobytes()


def test_a_cut_put_changes_nothing(server: Server, tree: Path, tmp_path: Path) -> None:
    url = server.url + "a/data"
    new = (-VALUES).tobytes()
    etag = headers_of(url)["etag"]
    cut_put(url, len(new), new[: len(new) // 2])  # (the client gone half-way)
    wait_for(lambda: "nothing was stored" in server.log())
    cut_put(url, len(new), new[: len(new) // 2], hold=True)  # (silent until its deadline)
    wait_for(lambda: server.log().count("PUT /a/data") >= 2)
    assert headers_of(url)["etag"] == etag
    assert curl(url).stdout == VALUES.tobytes()
    assert server.stop() == 0
    assert np.array_equal(stored(tree), VALUES)
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("names", [("data", "data"), ("data", "data.npy")])
def test_of_two_puts_with_one_if_match_exactly_one_wins(server: Server, tree: Path, tmp_path: Path,
                                                        names: tuple[str, str]) -> None:
    bodies = [body_file(tmp_path, VALUES + 1, "one"), body_file(tmp_path, VALUES + 2, "two")]
    if names[1] == "data.npy":
        np.save(tmp_path / "two.npy", VALUES + 2)
        bodies[1] = tmp_path / "two.npy"
    urls = [server.url + "a/" + name for name in names]
    tags = [headers_of(url)["etag"] for url in urls]

    def put(which: int) -> int:
        return status_of("-T", str(bodies[which]), "-H", f"If-Match: {tags[which]}", urls[which])

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        at_once = sorted(pool.map(put, (0, 1)))
    assert at_once == [204, 412]
    assert any(np.array_equal(stored(tree), VALUES + k) for k in (1, 2))
    tags = [headers_of(url)["etag"] for url in urls]  # (now, in turn)
    assert [put(0), put(1)] == [204, 412]
    assert np.array_equal(stored(tree), VALUES + 1)


@pytest.mark.fast
def test_an_empty_put_of_data_changes_nothing(server: Server, tree: Path) -> None:
    url = server.url + "a/data"
    etag = headers_of(url)["etag"]
    assert status_of("-X", "PUT", "--data-binary", "", url) == 204  # (Finder's, before the bytes)
    assert headers_of(url)["etag"] == etag
    assert np.array_equal(stored(tree), VALUES)

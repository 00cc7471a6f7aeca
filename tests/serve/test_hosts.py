"""Only the names the server answers to (DNS rebinding): a request whose Host names another
site (a page that rebound its own name to 127.0.0.1) gets 421 and none of the file's bytes,
for reads and writes alike; loopback addresses, localhost, the --listen host and the
--allow-host names are served, whatever the port; no Host at all only in HTTP/1.0."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import zarr

from tests.helpers.serving import curl, served, status_of
from zarrfs.errors import ZarrfsError
from zarrfs.serve.hosts import Hosts

ATTACKER = "attacker.example"


@pytest.fixture
def group(tmp_path: Path) -> Path:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("a", shape=(8,), chunks=(4,), dtype="u1")[...] = np.arange(8, dtype="u1")
    return tmp_path / "g.zarr"


def answer(*args: str) -> tuple[int, bytes]:
    """The status of a request curl makes, and the body it got."""
    done = curl("-w", "\n%{http_code}", *args)
    body, _, status = done.stdout.rpartition(b"\n")
    return int(status or b"0"), body


@pytest.mark.fast
def test_a_rebinding_host_gets_none_of_the_tree(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, ["rw"]) as server:
        data = server.url + "a/data"
        for host in (ATTACKER, f"{ATTACKER}:{urlsplit(server.url).port}", "127.0.0.1.attacker.example",
                     "localhost.attacker.example", "10.1.2.3"):
            status, body = answer("-H", f"Host: {host}", data)
            assert status == 421 and bytes(range(8)) not in body, (host, status, body)
        status, body = answer("-H", f"Host: {ATTACKER}", "-X", "PROPFIND", "-H", "Depth: 1", server.url)
        assert status == 421 and b"href" not in body, body
        rebound = ("-H", f"Host: {ATTACKER}")
        for method in ("PUT", "DELETE"):
            assert status_of(*rebound, "-X", method, "--data-binary", "xxxxxxxx", data) == 421
        assert status_of(*rebound, "-X", "MKCOL", server.url + "b/") == 421
        assert np.asarray(zarr.open_array(group / "a", mode="r")[...]).tolist() == list(range(8))
        assert not (group / "b").exists()
        assert server.log().count(f"'{ATTACKER}'") == 5  # (one line for each request refused)


@pytest.mark.fast
def test_the_names_of_this_server_are_served(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, ["rw"], args=["--allow-host", "Data.Example.org"]) as server:
        port = urlsplit(server.url).port
        data = server.url + "a/data"
        for host in (f"localhost:{port}", "localhost", f"127.0.0.1:{port}", "127.1.2.3", f"[::1]:{port}",
                     "viewer.localhost", "data.example.org", f"DATA.EXAMPLE.ORG.:{port}"):
            assert answer("-H", f"Host: {host}", data) == (200, bytes(range(8))), host
        named = ("-H", "Host: data.example.org")
        listing = curl(*named, "-X", "PROPFIND", "-H", "Depth: 1", server.url).stdout
        assert b"/a/" in listing
        written = bytes(range(8, 16)).decode()
        assert status_of(*named, "-X", "PUT", "--data-binary", written, data) in (200, 204)
        assert np.asarray(zarr.open_array(group / "a", mode="r")[...]).tolist() == list(range(8, 16))


def test_a_server_on_ipv6_loopback_answers_its_address(group: Path, tmp_path: Path) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with served(group, tmp_path, listen="[::1]:0") as server:
        assert answer("-g", server.url + "a/data") == (200, bytes(range(8)))
        assert answer("-g", "-H", f"Host: {ATTACKER}", server.url + "a/data")[0] == 421


@pytest.mark.fast
def test_no_host_is_served_in_http_1_0_only(group: Path, tmp_path: Path) -> None:
    """No browser sends a request without Host, so none is a rebinding page's; HTTP/1.1 asks
    for one (RFC 9112: 400)."""
    with served(group, tmp_path) as server:
        address = urlsplit(server.url)
        for line, expected in ((b"GET /a/data HTTP/1.0", b" 200 "), (b"GET /a/data HTTP/1.1", b" 400 ")):
            with socket.create_connection((address.hostname, address.port), timeout=60) as client:
                client.sendall(line + b"\r\nConnection: close\r\n\r\n")
                got = b""
                while piece := client.recv(65536):
                    got += piece
            assert got.split(b"\r\n")[0][8:13] == expected, got
            assert got.endswith(bytes(range(8))) == (expected == b" 200 "), got


@pytest.mark.fast
def test_the_names_a_server_answers_to() -> None:
    """On a wildcard address, the address a connection came in on is a name too (a test by
    the value: a real client would have to come from off loopback)."""
    everywhere = Hosts.given("0.0.0.0")
    assert everywhere.admit("192.0.2.7:8080", "192.0.2.7", "HTTP/1.1")
    assert everywhere.admit("192.0.2.7", "::ffff:192.0.2.7", "HTTP/1.1")  # (a dual-stack socket's)
    assert not everywhere.admit("192.0.2.8", "192.0.2.7", "HTTP/1.1")
    assert not everywhere.admit("attacker.example", "192.0.2.7", "HTTP/1.1")
    on_one = Hosts.given("192.0.2.7", ["files.example.org", "[2001:db8::1]"])
    assert on_one.admit("192.0.2.7:80", None, "HTTP/1.1")
    assert not on_one.admit("192.0.2.9", "192.0.2.9", "HTTP/1.1")  # (not a wildcard: its own name only)
    assert on_one.admit("[2001:db8:0::1]:8080", None, "HTTP/1.1")
    assert on_one.admit("Files.Example.Org", None, "HTTP/1.1")
    assert not on_one.admit(None, None, "HTTP/1.1") and on_one.admit(None, None, "HTTP/1.0")
    for wrong in ("files.example.org:8080", "http://files.example.org", "*", "", "a/b"):
        with pytest.raises(ZarrfsError, match="--allow-host"):
            Hosts.given("127.0.0.1", [wrong])

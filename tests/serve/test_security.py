"""Nobody in who does not belong: hostile paths (`..`, percent-encoded dots, NUL, a Destination
outside) and headers (too long, a body too big, a bad length), a link out of the store (the
mount's trust rules), a slow client dropped while others are served (silent, or trickling its
request a byte at a time past its deadline), and the credentials a server asks for: 0.0.0.0
without them refused at start, a token, basic auth over TLS."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import zarr

from tests.helpers.certificates import self_signed
from tests.helpers.mounting import ZARRFS
from tests.helpers.serving import curl, served, status_of
from tests.helpers.trust_helpers import NOBODY, public, raw_array, secret_file

__all__ = ["public"]  # (the fixture, used by name)

SECRET = b"\xde\xad\xbe\xef-secret"
TOKEN = "a-token-of-thirty-two-characters"


@pytest.fixture
def group(tmp_path: Path) -> Path:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("a", shape=(8,), chunks=(4,), dtype="u1")[...] = np.arange(8, dtype="u1")
    (tmp_path / "outside.txt").write_bytes(SECRET)
    return tmp_path / "g.zarr"


@pytest.mark.fast
def test_hostile_paths_name_nothing_outside_the_tree(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, ["rw"]) as server:
        base = server.url.rstrip("/")
        for path in ("/../outside.txt", "/a/../../outside.txt", "/%2e%2e/outside.txt",
                     "/a/%2E%2E/%2e%2e/outside.txt", "/a/.%2e/.%2e/outside.txt", "/a/%00/data",
                     "/a%5c..%5c..%5coutside.txt", "/./a/data"):
            done = curl("--path-as-is", "-w", "\n%{http_code}", base + path)
            body, _, status = done.stdout.rpartition(b"\n")
            assert SECRET not in body and status in (b"403", b"404"), (path, done)
        moved = status_of("-X", "MOVE", "-H", f"Destination: {base}/%2e%2e/elsewhere", base + "/a/")
        assert moved == 403
        assert status_of("-X", "PROPFIND", "-H", "Depth: 1", "--path-as-is", base + "/a/../../") == 403
        assert zarr.open_array(group / "a", mode="r")[7] == 7


def test_hostile_headers_are_refused(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path) as server:
        assert status_of("-H", "X-Long: " + "x" * (80 << 10), server.url + "a/data") in (400, 413, 431)
        big = tmp_path / "big.xml"
        big.write_bytes(b"<?xml version='1.0'?>" + b" " * (2 << 20))
        assert status_of("-X", "PROPFIND", "-H", "Depth: 0", "--data-binary", f"@{big}", server.url) == 413
        assert status_of("-X", "PROPFIND", "-H", "Depth: 0", "-H", "Content-Length: -1", server.url) == 400
        assert status_of("-H", "Range: bytes=9-2", server.url + "a/data") in (200, 416)
        assert status_of("-H", "Range: bytes=x", server.url + "a/data") in (200, 416)
        assert status_of(server.url + "a/data") == 200  # (still serving)
        assert "Traceback" not in server.log()


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the link's target is root's alone")
def test_a_link_out_of_the_store_is_not_followed(tmp_path: Path) -> None:
    """As the mount's trust rules say (tests/store/local/test_store_links.py): the chunk a
    link names outside the store is refused, and the log names its key."""
    store = tmp_path / "a.zarr"
    raw_array(store, np.arange(1, 13, dtype="u1"), 4)
    (store / "c" / "1").unlink()
    (store / "c" / "1").symlink_to(secret_file(tmp_path / "private", SECRET))
    with served(store, tmp_path, ["ro"]) as server:
        for name in ("data", "chunks/1"):
            done = curl("-w", "\n%{http_code}", server.url + name)
            assert SECRET not in done.stdout
        assert status_of("-r", "0-3", server.url + "data") == 206  # (the chunks inside are read)
        assert "c/1" in server.log()


def test_user_drops_privileges_as_a_mount_does(public: Path) -> None:
    """`-o user=nobody`: the server's process (and its decoding processes) act as nobody once
    the port is bound; the store, readable by nobody, is served."""
    store = public / "a.zarr"
    raw_array(store, np.arange(1, 13, dtype="u1"), 4)
    with served(store, public, ["ro", "user=nobody"]) as server:
        assert curl(server.url + "data").stdout == bytes(range(1, 13))
        ids = Path(f"/proc/{server.process.pid}/status").read_text().split("Uid:")[1].split()[:4]
        assert ids == [str(NOBODY.pw_uid)] * 4, ids  # (real, effective, saved, filesystem)


def test_a_slow_client_is_dropped_while_others_are_served(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, args=["--client-timeout", "2"]) as server:
        address = urlsplit(server.url)
        slow = socket.create_connection((address.hostname, address.port), timeout=30)
        try:
            slow.sendall(b"GET /a/data HTTP/1.1\r\nHost: x\r\n")  # (and nothing more)
            assert curl(server.url + "a/data").stdout == bytes(range(8))
            start = time.monotonic()
            answer = slow.recv(4096)  # (the server's 408, or its close: b"")
            assert time.monotonic() - start < 25
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer
        finally:
            slow.close()
        assert curl(server.url + "a/data").stdout == bytes(range(8))


def test_a_client_trickling_its_request_is_dropped_at_its_deadline(group: Path, tmp_path: Path) -> None:
    """Clients sending their headers, or a body, a byte every half second (never silent for
    the 3 s of cheroot's timeout) are cut at their deadline, while curl is served."""
    starts = [b"GET /a/data HTTP/1.1\r\nHost: x\r\nX-Slow: ",
              b"PROPFIND /a/ HTTP/1.1\r\nHost: x\r\nDepth: 0\r\nContent-Length: 200\r\n\r\n"]
    with served(group, tmp_path, args=["--client-timeout", "3"]) as server:
        address = urlsplit(server.url)
        held: list[float] = []

        def trickling(start: bytes) -> None:
            with socket.create_connection((address.hostname, address.port), timeout=60) as client:
                held.append(trickle(client, start, b"y"))

        tricklers = [threading.Thread(target=trickling, args=(start,)) for start in starts * 3]
        for thread in tricklers:
            thread.start()
        while any(thread.is_alive() for thread in tricklers):
            assert curl(server.url + "a/data").stdout == bytes(range(8))
            time.sleep(0.2)
        assert len(held) == len(tricklers) and max(held) < 20, held  # (3 s each, and a loaded machine)
        assert server.log().count("sent its request too slowly") == len(tricklers)
        assert "Traceback" not in server.log()


@pytest.mark.fast
def test_any_address_but_loopback_needs_credentials(group: Path, tmp_path: Path) -> None:
    done = subprocess.run([ZARRFS, "serve", str(group), "--listen", "0.0.0.0:0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "needs credentials" in done.stderr, done
    assert "Traceback" not in done.stderr and "serving" not in done.stdout
    (tmp_path / "users").write_text("ann:a-long-password\n")
    done = subprocess.run([ZARRFS, "serve", str(group), "--listen", "0.0.0.0:0", "--users-file",
                           str(tmp_path / "users")], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "needs TLS" in done.stderr, done


def test_a_token_is_asked_for(group: Path, tmp_path: Path) -> None:
    """(Over plain HTTP, as asked: TLS is test_basic_auth_over_tls's, and
    test_plain_http.py's the refusal without it.)"""
    (tmp_path / "token").write_text(TOKEN + "\n")
    with served(group, tmp_path, args=["--token-file", str(tmp_path / "token"), "--allow-plain-http"],
                listen="0.0.0.0:0") as server:
        url = server.url.replace("0.0.0.0", "127.0.0.1") + "a/data"
        assert status_of(url) == 401
        assert status_of("-H", "Authorization: Bearer wrong", url) == 401
        assert curl("-H", f"Authorization: Bearer {TOKEN}", url).stdout == bytes(range(8))
        assert curl("-u", f"anyone:{TOKEN}", url).stdout == bytes(range(8))  # (clients that say basic)


def test_basic_auth_over_tls(group: Path, tmp_path: Path) -> None:
    certificate, key = self_signed(tmp_path)
    (tmp_path / "users").write_text("ann:a-long-password\n")
    args = ["--users-file", str(tmp_path / "users"), "--tls-cert", str(certificate), "--tls-key", str(key)]
    with served(group, tmp_path, args=args, listen="0.0.0.0:0") as server:
        url = server.url.replace("0.0.0.0", "localhost") + "a/data"
        assert url.startswith("https://")
        assert status_of("--cacert", str(certificate), url) == 401
        assert status_of("--cacert", str(certificate), "-u", "ann:wrong", url) == 401
        got = curl("--cacert", str(certificate), "-u", "ann:a-long-password", url)
        assert got.stdout == bytes(range(8)), got
        assert status_of(url.replace("https", "http")) in (0, 400)  # (plain HTTP gets nothing)


def test_a_client_trickling_its_tls_handshake_is_dropped_at_its_deadline(group: Path, tmp_path: Path) -> None:
    """A client sending its ClientHello a byte every half second (never silent for the 3 s of
    cheroot's timeout) is cut at its deadline (the handshake is under its request's head
    deadline), and the clients after it are served."""
    certificate, key = self_signed(tmp_path)
    (tmp_path / "users").write_text("ann:a-long-password\n")
    args = ["--users-file", str(tmp_path / "users"), "--tls-cert", str(certificate), "--tls-key", str(key),
            "--client-timeout", "3"]
    with served(group, tmp_path, args=args, listen="0.0.0.0:0") as server:
        address = urlsplit(server.url)
        url = server.url.replace("0.0.0.0", "localhost") + "a/data"
        with socket.create_connection(("127.0.0.1", address.port), timeout=60) as client:
            # (a handshake record of 512 bytes, begun)
            held = trickle(client, b"\x16\x03\x01\x02\x00", b"\x01")
        assert held < 20, held  # (3 s, and a loaded machine)
        got = curl("--cacert", str(certificate), "-u", "ann:a-long-password", url)
        assert got.stdout == bytes(range(8)), got
        assert "Traceback" not in server.log()


def trickle(client: socket.socket, start: bytes, byte: bytes) -> float:
    """Sends `start`, then `byte` every half second, until the server shuts the connection
    (for a minute at most): the seconds it took."""
    began = time.monotonic()
    client.sendall(start)
    try:
        for _ in range(120):  # (a minute, if nothing stops it)
            time.sleep(0.5)
            client.sendall(byte)
    except OSError:  # (the server shut the connection: the send fails)
        pass
    return time.monotonic() - began

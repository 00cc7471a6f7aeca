"""Security of credentials: they never show in argv, /proc/mounts or the daemon's log, and
are refused as mount options."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.http_server import answering
from tests.helpers.mounting import ZARRFS, is_mounted, mounted
from tests.helpers.s3_server import S3Server
from tests.helpers.security_arrays import SHAPE, VALUES, create_array, pwrite
from zarrfs.cli import main as zarrfs_main

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None,
    reason="needs FUSE (/dev/fuse and fusermount3)",
)


# -- (d) credentials ----------------------------------------------------------------------------

ACCESS_KEY = "AKIAZARRFSDONOTLEAK7"
SECRET_KEY = "zarrfsSecretDoNotLeak0123456789abcdefABCD"
SESSION_TOKEN = "zarrfsSessionTokenDoNotLeak9876543210"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_SESSION_TOKEN": SESSION_TOKEN}


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


def test_credentials_as_mount_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    done = subprocess.run([ZARRFS, "mount", "s3://bucket/array", str(mountpoint), "-o",
                           f"endpoint_url=http://127.0.0.1:9,secret={SECRET_KEY}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "secret" in line and "environment" in line and SECRET_KEY not in line, line
    assert not is_mounted(mountpoint)
    for name in ("key", "token", "password", "aws_access_key_id", "aws_secret_access_key",
                 "aws_session_token"):
        assert zarrfs_main(["mount", "s3://bucket/array", str(mountpoint), "-o",
                            f"ro,{name}={SECRET_KEY}"]) == 1
        line = one_line(capsys.readouterr().err)
        assert name in line and "environment" in line and SECRET_KEY not in line, line
    assert not is_mounted(mountpoint)


def write_s3_array(server: S3Server) -> None:
    zarr = pytest.importorskip("zarr")
    array = zarr.create_array(
        store=f"s3://{server.bucket}/array", shape=SHAPE, chunks=(8, 8), dtype="<i4",
        fill_value=0, storage_options={"endpoint_url": server.endpoint_url,
                                       "key": "testing", "secret": "testing"})
    array[...] = VALUES


@contextlib.contextmanager
def s3_mount(server: S3Server, tmp_path: Path, log: Path) -> Iterator[Any]:
    pytest.importorskip("s3fs")
    write_s3_array(server)
    options = [f"endpoint_url={server.endpoint_url}", "debug", f"log={log}"]
    with mounted(f"s3://{server.bucket}/array", tmp_path / "mnt", options,
                 env=CREDENTIALS) as mount:
        assert mount.data.read_bytes() == VALUES.tobytes()
        pwrite(mount.chunk("c/1/1"), np.zeros(64, "<i4").tobytes(), 0)  # a signed PUT too
        yield mount


def test_environment_credentials_stay_out_of_argv_and_mount_table(
    s3_server: S3Server, tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    with s3_mount(s3_server, tmp_path, log) as mount:
        with open(f"/proc/{mount.process.pid}/cmdline", "rb") as f:
            places = {"argv": f.read().decode(errors="replace")}
        for table in ("/proc/mounts", "/proc/self/mountinfo"):
            places[table] = Path(table).read_text()
        assert f"s3://{s3_server.bucket}/array" in places["/proc/mounts"]
        with open(f"/proc/{mount.process.pid}/environ", "rb") as f:
            assert SECRET_KEY.encode() in f.read()  # it was there to be leaked
    places["daemon log"] = log.read_text(errors="replace")
    places["daemon stderr"] = mount.log()
    assert "mounted" in places["daemon log"]
    leaks = [f"{what} holds {name}" for what, text in places.items()
             for name, value in CREDENTIALS.items()
             if value in text and not (what == "daemon log" and name != "AWS_SECRET_ACCESS_KEY")]
    assert not leaks  # (the access key and token in the debug log: the test below)


def test_debug_log_holds_no_access_key_or_session_token(
    s3_server: S3Server, tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    with s3_mount(s3_server, tmp_path, log):
        pass
    text = log.read_text(errors="replace")
    assert "DEBUG" in text
    assert ACCESS_KEY not in text and SESSION_TOKEN not in text


@contextlib.contextmanager
def http_server(directory: Path) -> Iterator[int]:
    """A plain HTTP server for `directory` on 127.0.0.1 (it ignores the URL's user:password)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    with answering(functools.partial(Quiet, directory=str(directory))) as port:
        yield port


PASSWORD = "UrlPasswordDoNotLeak42"


@pytest.mark.parametrize("debug", [
    False,
    True,
], ids=["info", "debug"])
def test_a_password_in_the_url_stays_out_of_the_mount_table_and_log(
    tmp_path: Path, debug: bool
) -> None:
    pytest.importorskip("aiohttp")
    create_array(tmp_path / "array")
    log = tmp_path / "daemon.log"
    options = ["ro", f"log={log}", *(["debug"] if debug else [])]
    with http_server(tmp_path) as port:
        source = f"http://alice:{PASSWORD}@127.0.0.1:{port}/array"
        with mounted(source, tmp_path / "mnt", options) as mount:
            assert mount.data.read_bytes() == VALUES.tobytes()
            table = Path("/proc/mounts").read_text()
            assert f"http://127.0.0.1:{port}/array" in table
            assert PASSWORD not in table
    text = log.read_text(errors="replace")
    assert "mounted" in text
    assert PASSWORD not in text

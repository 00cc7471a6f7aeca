"""Credentials only over TLS off loopback: a token or a users file on a non-loopback address
without a certificate refuses to start and says why, unless --allow-plain-http asks for plain
HTTP, which starts and warns in the log. On loopback a token needs no TLS. (0.0.0.0 is bound,
and only 127.0.0.1 is talked to.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS
from tests.helpers.serving import curl, served

TOKEN = "a-token-of-thirty-two-characters"


@pytest.fixture
def group(tmp_path: Path) -> Path:
    root = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    root.create_array("a", shape=(8,), chunks=(4,), dtype="u1")[...] = np.arange(8, dtype="u1")
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "users").write_text("ann:a-long-password\n")
    return tmp_path / "g.zarr"


@pytest.mark.fast
@pytest.mark.parametrize(("option", "what"), [("--token-file", "the token"),
                                              ("--users-file", "passwords")])
def test_credentials_off_loopback_without_tls_refuse_to_start(group: Path, tmp_path: Path, option: str,
                                                              what: str) -> None:
    done = subprocess.run([ZARRFS, "serve", str(group), "--listen", "0.0.0.0:0", option,
                           str(tmp_path / option.removeprefix("--").removesuffix("-file"))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "serving" not in done.stdout, done
    assert "needs TLS" in done.stderr and what in done.stderr and "in the clear" in done.stderr, done.stderr
    assert "--allow-plain-http" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.fast
def test_allow_plain_http_serves_and_warns(group: Path, tmp_path: Path) -> None:
    args = ["--token-file", str(tmp_path / "token"), "--allow-plain-http"]
    with served(group, tmp_path, args=args, listen="0.0.0.0:0") as server:
        assert server.url.startswith("http://")
        url = server.url.replace("0.0.0.0", "127.0.0.1") + "a/data"
        assert curl("-H", f"Authorization: Bearer {TOKEN}", url).stdout == bytes(range(8))
        warnings = [line for line in server.log().splitlines() if "WARNING" in line]
        assert len(warnings) == 1 and "in the clear" in warnings[0], server.log()


@pytest.mark.fast
def test_a_token_on_loopback_needs_no_tls_nor_warning(group: Path, tmp_path: Path) -> None:
    with served(group, tmp_path, args=["--token-file", str(tmp_path / "token")]) as server:
        assert curl("-H", f"Authorization: Bearer {TOKEN}", server.url + "a/data").stdout == bytes(range(8))
        assert "WARNING" not in server.log()

"""A machine without an optional package (a bare `pip install zarrfs s3fs`, no extras): what
can work without it works, and what cannot says which extra installs it, in `zarrfs mount`'s
own message, not in a log. The package is hidden from the daemon by a stand-in of the same
name, first on its path, that fails to import as a missing one does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS, mounted
from tests.helpers.s3_server import S3Server


def hiding(tmp_path: Path, *packages: str) -> dict[str, str]:
    """An environment in which importing `packages` fails as if they were not installed."""
    hidden = tmp_path / "hidden"
    for package in packages:
        (hidden / package).mkdir(parents=True)
        (hidden / package / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{package}'\", name={package!r})\n")
    path = os.pathsep.join(p for p in (str(hidden), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def test_s3_mounts_and_reads_without_obstore(s3_server: S3Server, tmp_path: Path) -> None:
    values = np.arange(64 * 64, dtype="<u2").reshape(64, 64)
    options = {"endpoint_url": s3_server.endpoint_url, "key": "testing", "secret": "testing"}
    array = zarr.create_array(store=f"s3://{s3_server.bucket}/a", shape=values.shape, chunks=(16, 16),
                              dtype="<u2", storage_options=options)
    array[...] = values
    env = hiding(tmp_path, "obstore")
    with mounted(f"s3://{s3_server.bucket}/a", tmp_path / "mnt", [f"endpoint_url={s3_server.endpoint_url}"],
                 env=env) as m:
        assert m.data.read_bytes() == values.tobytes()


@pytest.mark.parametrize("command", ["mount", "info"])
def test_a_codec_whose_package_is_missing_names_its_extra(tmp_path: Path, command: str) -> None:
    path = tmp_path / "p.zarr"
    array = zarr.create_array(path, shape=(32,), chunks=(16,), dtype="<u2",
                              serializer={"name": "numcodecs.pcodec", "configuration": {"level": 8}},
                              compressors=None)
    array[...] = np.arange(32, dtype="<u2")
    args = [ZARRFS, command, str(path)] + ([str(tmp_path / "mnt")] if command == "mount" else [])
    (tmp_path / "mnt").mkdir()
    done = subprocess.run(args, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **hiding(tmp_path, "pcodec")})
    shown = done.stdout + done.stderr
    assert "zarrfs[codecs]" in shown and "pcodec" in shown, shown
    assert "Traceback" not in shown, shown
    if command == "mount":
        assert done.returncode != 0
        assert "see the log" not in shown, shown


def test_what_stops_the_daemon_before_mounting_is_shown(tmp_path: Path) -> None:
    """Any failure of the forked daemon before it serves reaches `zarrfs mount`'s own output."""
    path = tmp_path / "a.zarr"
    zarr.create_array(path, shape=(4,), chunks=(2,), dtype="u1")[...] = 1
    (tmp_path / "mnt").mkdir()
    done = subprocess.run([ZARRFS, "mount", str(path), str(tmp_path / "mnt"), "-o", "metrics=127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **hiding(tmp_path, "prometheus_client")})
    assert done.returncode != 0
    assert "the package prometheus_client is missing" in done.stderr, done.stderr


@pytest.mark.parametrize(("url", "package", "extra"), [("az://container/a", "adlfs", "azure"),
                                                        ("gs://bucket/a", "gcsfs", "gcs")])
@pytest.mark.parametrize("command", ["mount", "info"])
def test_a_store_whose_package_is_missing_names_its_extra(tmp_path: Path, url: str, package: str, extra: str,
                                                          command: str) -> None:
    """fsspec says "Install adlfs to ..." of a failed import: zarrfs names the extra."""
    (tmp_path / "mnt").mkdir()
    args = [ZARRFS, command, url] + ([str(tmp_path / "mnt")] if command == "mount" else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **hiding(tmp_path, package)})
    shown = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"the package {package} is missing: pip install 'zarrfs[{extra}]'" in shown, shown
    assert "Traceback" not in shown, shown

"""`zarrfs.mount` from Python: real daemons, checked through the files and with zarr-python."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

import zarrfs
from tests.helpers.mounting import is_mounted
from zarrfs.api import options_text
from zarrfs.options import MountOptions, OptionError

pytestmark = pytest.mark.fast

SHAPE = (40, 60)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A v3 uint16 array of 40x60 in 10x20 chunks holding 0, 1, 2, ... (written by zarr-python)."""
    path = tmp_path / "array.zarr"
    array = zarr.create_array(str(path), shape=SHAPE, chunks=(10, 20), dtype="uint16", fill_value=0)
    array[...] = np.arange(np.prod(SHAPE), dtype="uint16").reshape(SHAPE)
    return path


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where `tempfile` puts the API's temporary directories during the test, to see them go."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(directory))
    return directory


def expected() -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype="<u2").reshape(SHAPE)


def test_context_manager_mounts_on_a_temporary_directory_and_removes_it(
        source: Path, private_tmp: Path) -> None:
    with zarrfs.mount(source) as m:
        assert is_mounted(m.path) and m.path.is_relative_to(private_tmp)
        assert (m.path / "data").read_bytes() == expected().tobytes()
        assert {"data", "chunks", "zarr.json"} <= set(os.listdir(m.path))
    assert not is_mounted(m.path) and not m.path.exists()
    assert list(private_tmp.iterdir()) == []
    assert "mounted" in m.log()


def test_fresh_interpreter(source: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import json, os, zarrfs
        with zarrfs.mount({str(source)!r}, ro=True, views=["npy"]) as m:
            listing = sorted(os.listdir(m.path))
            head = (m.path / "data").read_bytes()[:8].hex()
        print(json.dumps({{"path": str(m.path), "listing": listing, "head": head}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["listing"] == ["chunks", "data", "data.npy", "zarr.json"]
    assert report["head"] == expected().tobytes()[:8].hex()
    assert not os.path.exists(report["path"])


def test_handle_on_a_given_mountpoint(source: Path, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    m = zarrfs.mount(source, mountpoint, cache="64M", recheck="never")
    try:
        assert m.path == mountpoint and m.mounted
        (m.path / "data").read_bytes()
        stats = m.stats()
        assert stats["cache_limit"] == 64 << 20
        assert stats["requests"] > 0 and stats["cache_misses"] > 0
        assert stats["rechecks"] == 0  # recheck=never reached the daemon
    finally:
        m.unmount()
    assert not m.mounted and not is_mounted(mountpoint)
    assert mountpoint.is_dir()  # the caller's directory stays


def test_rw_writes_land_in_the_store(source: Path) -> None:
    with zarrfs.mount(source, rw=True) as m:
        data = np.memmap(m.path / "data", dtype="<u2", mode="r+", shape=SHAPE)
        data[5:15, 7] = 4242
        data.flush()
        del data
    want = expected()
    want[5:15, 7] = 4242
    np.testing.assert_array_equal(zarr.open_array(str(source), mode="r")[...], want)


def test_ro_refuses_writes(source: Path) -> None:
    with zarrfs.mount(source, ro=True) as m:
        with pytest.raises(OSError) as refused:
            os.open(m.path / "data", os.O_WRONLY)
        assert refused.value.errno == errno.EROFS
        assert m.stats()["bytes_stored"] == 0
    np.testing.assert_array_equal(zarr.open_array(str(source), mode="r")[...], expected())


@pytest.mark.parametrize("options", [
    {"cache": "lots"}, {"no_such_option": 1}, {"views": ["npy", "tiff"]}, {"recheck": "sometimes"},
    {"timeout": 0}, {"endpoint_url": "http://a,ro"}, {"secret": "hunter2"},
])
def test_bad_option_raises_before_mounting(source: Path, private_tmp: Path,
                                           options: dict[str, object]) -> None:
    with pytest.raises(OptionError):
        zarrfs.mount(source, **options)
    assert list(private_tmp.iterdir()) == []  # no mountpoint made, so no daemon started


def test_unmountable_source_raises_the_daemons_message(tmp_path: Path, private_tmp: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(zarrfs.MountError) as failed:
        zarrfs.mount(empty)
    assert str(failed.value) == (f"cannot mount {empty}: zarr.json: not found "
                                 "(nor .zarray / .zgroup / meta): no Zarr array or group")
    assert list(private_tmp.iterdir()) == []


def test_missing_mountpoint_raises(source: Path, tmp_path: Path) -> None:
    with pytest.raises(zarrfs.MountError) as failed:
        zarrfs.mount(source, tmp_path / "absent")
    assert str(failed.value) == f"mountpoint {tmp_path / 'absent'} does not exist"


def test_daemon_that_does_not_exit_in_time_is_an_error(source: Path) -> None:
    m = zarrfs.mount(source, rw=True)
    os.kill(m.process.pid, signal.SIGSTOP)
    try:
        with pytest.raises(zarrfs.MountError, match=r"did not exit within 0\.5 s"):
            m.unmount(timeout=0.5)
    finally:
        os.kill(m.process.pid, signal.SIGCONT)
    m.unmount()  # again: it exits once it runs
    assert not m.path.exists()


def test_killed_daemon_is_reported_at_unmount(source: Path) -> None:
    m = zarrfs.mount(source)
    m.process.kill()
    with pytest.raises(zarrfs.MountError, match="killed by signal 9"):
        m.unmount()
    assert not is_mounted(m.path) and not m.path.exists()


@pytest.mark.parametrize(("options", "text"), [
    ({"ro": True, "cache": "1G"}, "ro,cache=1G"),
    ({"rw": True, "direct_io": False, "log": None}, "rw"),
    ({"ro": False}, "rw"),
    ({"rw": False}, "ro"),
    ({"views": ["npy", "vrt"], "timeout": 10}, "views=npy:vrt,timeout=10"),
    ({"views": []}, "views=none"),
    ({"umask": 0o027, "uid": 1000}, "umask=27,uid=1000"),
    ({"references_allow": ["/data", "s3://other/x"]}, "references_allow=/data:s3://other/x"),
    ({"endpoint_url": "http://127.0.0.1:9000", "anon": True}, "endpoint_url=http://127.0.0.1:9000,anon"),
    ({"log": Path("/var/log/z.log")}, "log=/var/log/z.log"),
    ({"fill_missing_data_reads": False, "store_data_equal_to_fill_value": True},
     "fill_missing_data_reads=false,store_data_equal_to_fill_value=true"),
])
def test_keyword_options_are_the_o_options(options: dict[str, object], text: str) -> None:
    assert options_text(options) == text
    MountOptions.parse([text])

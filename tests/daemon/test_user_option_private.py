"""`-o user=NAME` from a Python NAME cannot run or read (a pyenv or conda Python, a virtual
environment, in root's home): everything the daemon needs of it is started or imported while
it is root (the watchdog; the codecs, store clients and encodings a mount loads only when it
first needs them: zarrfs.daemon.preload), so the mount serves as NAME; what still cannot be
loaded fails the mount in one line naming NAME and the path NAME cannot reach; and a daemon
that fails after the kernel's mount leaves no mount behind.

The Python is this one, made private: its executable, standard library and packages (this
checkout's zarrfs among them) linked into a directory only root may enter (mode 0700), with a
virtual environment on it, as `python -m venv` makes in a home directory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

import zarrfs
from tests.helpers.http_server import serving
from tests.helpers.mounting import is_mounted, mounted, wait_until
from tests.helpers.s3_server import S3Server, free_port
from tests.helpers.s3_server import serving as s3_serving
from tests.helpers.trust_helpers import NOBODY, needs_root, public, read_as

__all__ = ["public"]  # (the fixture, used by name)

SECONDS = 120  # any command of these tests
BLOSC = np.arange(1000, dtype="<i4")  # numcodecs' blosc: a lock (multiprocessing) at first use
BAND = np.arange(30 * 40, dtype="<f4").reshape(30, 40)  # a CRS by its code: pyproj's lookup
EPSG = 32633


@pytest.fixture(scope="module")
def private_python() -> Iterator[Path]:
    """The `python` of a virtual environment in a directory only root may enter."""
    needs_root()
    base = Path(tempfile.mkdtemp(prefix="zarrfs-private-python-", dir="/tmp"))  # (mode 0700)
    try:
        yield _private_python(base)
    finally:
        subprocess.run(["rm", "-rf", str(base)], timeout=SECONDS)  # (links: nothing they lead to)


def _private_python(base: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    home = base / "python"  # an installation of this interpreter: lib/pythonX.Y beside bin/
    (home / "bin").mkdir(parents=True)
    (home / "lib").mkdir()
    _link(Path(os.path.realpath(sys.executable)), home / "bin" / version)
    _link(Path(sysconfig.get_path("stdlib")), home / "lib" / version)
    for packages in ("site-packages", "dist-packages"):
        subprocess.run(["rm", "-rf", str(home / "lib" / version / packages)], timeout=SECONDS)
    subprocess.run([str(home / "bin" / version), "-m", "venv", "--without-pip", str(base / "venv")],
                   check=True, timeout=SECONDS, cwd="/", env=_clean_environment())
    site = base / "venv" / "lib" / version / "site-packages"
    site.rmdir()
    _link(Path(sysconfig.get_path("purelib")), site)  # this environment's packages ...
    for editable in site.glob("__editable__*"):  # ... and this checkout's zarrfs, not a link to it
        editable.unlink()
    subprocess.run(["cp", "-r", str(Path(zarrfs.__file__).parent), str(site / "zarrfs")], check=True,
                   timeout=SECONDS)
    python = base / "venv" / "bin" / "python"
    made = subprocess.run([str(python), "-c", "import zarrfs.daemon.run, sys; print(sys.prefix)"],
                          capture_output=True, text=True, timeout=SECONDS, cwd="/", env=_clean_environment())
    if made.returncode != 0 or made.stdout.strip() != str(base / "venv"):
        pytest.skip(f"this Python cannot be made private by linking it elsewhere: {made.stderr[-500:]}")
    with pytest.raises(PermissionError):  # (what the test is about)
        subprocess.run([str(python), "-c", "pass"], timeout=SECONDS, user=NOBODY.pw_uid,
                       group=NOBODY.pw_gid, extra_groups=[])
    return python


def _link(source: Path, target: Path) -> None:
    """`target`: `source`'s files hard-linked (symbolic links on another filesystem: reached
    through the private directory all the same)."""
    if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True,
                      timeout=SECONDS).returncode != 0:
        subprocess.run(["rm", "-rf", str(target)], timeout=SECONDS)
        subprocess.run(["cp", "-as", str(source), str(target)], check=True, timeout=SECONDS)


def _run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -I ARGS` as a forked daemon's command runs (returning once it mounted or failed):
    its own modules only, none from the working directory or PYTHONPATH."""
    return subprocess.run([str(python), "-I", *args], capture_output=True, text=True, timeout=SECONDS,
                          cwd="/", env=_clean_environment())


def _clean_environment() -> dict[str, str]:
    """This environment without PYTHONPATH: the private Python imports only its own."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _group(directory: Path) -> Path:
    """A group owned by nobody: a blosc array, and a GeoZarr band whose CRS is an EPSG code."""
    path = directory / "g.zarr"
    group = zarr.open_group(str(path), mode="w", zarr_format=3, attributes={"proj:code": f"EPSG:{EPSG}"})
    group.create_array("blosc", shape=BLOSC.shape, chunks=(100,), dtype=BLOSC.dtype,
                       compressors=zarr.codecs.BloscCodec())[...] = BLOSC
    geo = {"spatial:dimensions": ["y", "x"], "spatial:transform": [10.0, 0, 500000.0, 0, -10.0, 5000000.0]}
    group.create_array("band", shape=BAND.shape, chunks=(16, 16), dtype=BAND.dtype,
                       dimension_names=["y", "x"], attributes=geo)[...] = BAND
    _give_to_nobody(path)
    return path


def _give_to_nobody(path: Path) -> None:
    for directory, _, files in os.walk(path):
        for name in [directory, *(os.path.join(directory, f) for f in files)]:
            os.chown(name, NOBODY.pw_uid, NOBODY.pw_gid)


def _zipped(group: Path) -> Path:
    """The group in a zip archive, its names ASCII with no UTF-8 flag: code page 437."""
    archive = group.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w") as z:
        for file in sorted(p for p in group.rglob("*") if p.is_file()):
            z.write(file, file.relative_to(group).as_posix())
    archive.chmod(0o644)
    return archive


@contextlib.contextmanager
def _source(kind: str, directory: Path) -> Iterator[str]:
    group = _group(directory)
    if kind == "directory":
        yield str(group)
    elif kind == "zip":
        yield str(_zipped(group))
    else:  # (a host name is looked up through the idna codec, even an address's)
        with serving(directory, listings=True) as server:
            yield f"{server.url}/{group.name}"


def _watchdog_of(daemon: int) -> int | None:
    """The pid of the watchdog of the daemon `daemon`, if it runs."""
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            args = (entry / "cmdline").read_bytes().split(b"\0")
            if entry.name.isdigit() and b"zarrfs.daemon.watchdog" in args and str(daemon).encode() in args:
                return int(entry.name)
    return None


def _ids(pid: int) -> list[str]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return fields["Uid"].split() + fields["Gid"].split()


@pytest.mark.parametrize("kind", ["directory", "zip", "http"])
def test_a_python_nobody_cannot_run_serves_as_nobody(public: Path, private_python: Path, kind: str) -> None:
    base = private_python.parents[2]
    nobodys = [str(NOBODY.pw_uid)] * 4 + [str(NOBODY.pw_gid)] * 4
    command = (str(private_python), "-I", "-m", "zarrfs.cli")  # (-I: nothing from the cwd, nor PYTHONPATH)
    options = ["ro", "allow_other", "user=nobody"]
    with _source(kind, public) as source, mounted(source, public / "mnt", options, command=command,
                                                  env={"PYTHONPATH": ""}) as mount:  # (the watchdog's)
        daemon = mount.process.pid
        assert _ids(daemon) == nobodys
        # The watchdog was started as root, and is nobody's too.
        watchdog = wait_until(lambda: _watchdog_of(daemon), what="the watchdog")
        wait_until(lambda: _ids(watchdog) == nobodys, what="the watchdog serving as nobody")
        assert os.readlink(f"/proc/{watchdog}/exe") == os.path.realpath(private_python)
        # Every file of the mount reads: the blosc array (its lock at its first use, as nobody),
        # the band's GeoTIFF (pyproj, imported while root), every view of each.
        for directory, _, files in os.walk(mount.path):
            for name in files:
                Path(directory, name).read_bytes()
        assert read_as(mount.path / "blosc" / "data") == BLOSC.tobytes()
        # ... and blosc made its lock (a POSIX semaphore, mapped): without multiprocessing's
        # module of it, numcodecs takes it for missing and runs blosc without one, silently.
        assert "/dev/shm/sem." in Path(f"/proc/{daemon}/maps").read_text()
        with tifffile.TiffFile(mount.path / "band" / "data.tif") as tif:
            assert tif.geotiff_metadata["ProjectedCSTypeGeoKey"] == EPSG
            assert np.array_equal(tif.asarray(), BAND)
        log = mount.log()
        assert f"nobody cannot reach {base}, " in log  # (said once, at the start)
        assert "Traceback" not in log and "ERROR" not in log, log
        mount.process.send_signal(signal.SIGTERM)
        assert mount.process.wait(timeout=SECONDS) == 0, mount.log()
        assert not is_mounted(mount.path)
        wait_until(lambda: _watchdog_of(daemon) is None, what="the watchdog's end")


@pytest.mark.parametrize("failing", ["watchdog", "drop"])
def test_a_failure_after_the_kernel_mount_unmounts_it_in_one_line(public: Path, private_python: Path,
                                                                   failing: str) -> None:
    """Starting the watchdog as nobody failed so ([Errno 13], the Python nobody may not run),
    and left a dead mount behind; a failure giving root up, likewise."""
    raised = {"watchdog": ("zarrfs.daemon.watchdog", "start",
                           f"PermissionError(13, 'Permission denied', {str(private_python)!r})"),
              "drop": ("zarrfs.daemon.privileges", "Identity.drop",
                       "PermissionError(1, 'Operation not permitted')")}
    module, function, error = raised[failing]
    script = (f"import importlib, sys\nmodule = importlib.import_module({module!r})\n"
              f"def fail(*args, **kwargs):\n    raise {error}\n"
              f"owner, _, name = {function!r}.rpartition('.')\n"
              "setattr(getattr(module, owner) if owner else module, name, fail)\n"
              "from zarrfs.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    store, mountpoint, log = _group(public), public / "mnt", public / "log"
    mountpoint.mkdir()
    try:
        done = _run(private_python, "-c", script, "mount", str(store), str(mountpoint), "-o",
                    f"ro,allow_other,user=nobody,log={log}")
        assert done.returncode == 1
        assert not is_mounted(mountpoint)  # (the command returns once the daemon has exited)
        assert os.listdir(mountpoint) == []
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"zarrfs: cannot serve on {mountpoint}: ")
        assert f"-o user=nobody: nobody cannot reach {private_python.parents[2]}" in lines[0]
        assert "Traceback" not in log.read_text()
        assert "unmounted" in log.read_text()
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], timeout=SECONDS)


def test_a_source_nobody_cannot_reach_is_named(public: Path, private_python: Path) -> None:
    secret = public / "secret"
    secret.mkdir(mode=0o700)  # root's alone
    store = _group(secret)
    (public / "mnt").mkdir()
    done = _run(private_python, "-m", "zarrfs.cli", "mount", str(store), str(public / "mnt"),
                "-o", "ro,user=nobody")
    assert done.returncode == 1
    assert not is_mounted(public / "mnt")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"zarrfs: cannot mount {store}: ")
    assert done.stderr.rstrip().endswith(f"(-o user=nobody: nobody cannot reach {secret})")


def test_what_still_cannot_be_loaded_is_named_in_one_line(public: Path, private_python: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore reads its data files (the service's model, its endpoints) when a client is
    made, as nobody: S3 from such a Python cannot mount, and says why."""
    import boto3

    with contextlib.ExitStack() as stack:
        moto = contextlib.contextmanager(s3_serving)
        server = stack.enter_context(moto(S3Server(free_port()), monkeypatch))
        client = boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1")
        group = _group(public)
        for file in (p for p in group.rglob("*") if p.is_file()):
            client.put_object(Bucket=server.bucket, Key=f"g.zarr/{file.relative_to(group).as_posix()}",
                              Body=file.read_bytes())
        (public / "mnt").mkdir()
        done = _run(private_python, "-m", "zarrfs.cli", "mount", f"s3://{server.bucket}/g.zarr",
                    str(public / "mnt"), "-o", f"ro,user=nobody,endpoint_url={server.endpoint_url}")
    assert done.returncode == 1
    assert not is_mounted(public / "mnt")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert f"-o user=nobody: nobody cannot reach {private_python.parents[2]}" in done.stderr

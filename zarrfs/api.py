"""Mount from Python: `zarrfs.mount(source)` runs the real daemon for the caller.

    with zarrfs.mount("/srv/data/array.zarr", ro=True, cache="1G") as m:
        a = np.memmap(m.path / "data", ...)

The daemon is the `zarrfs` command itself (`python -m zarrfs.cli mount -f`), a child process
of the caller in a session of its own (a Ctrl-C meant for the caller does not cut a write-back
short: leaving the block unmounts properly). It tells us it serves the way it tells systemd:
READY=1 on the datagram socket named by NOTIFY_SOCKET, sent once the mount answers a stat.
Unmounting is `fusermount3 -u`, then waiting for the daemon, which writes everything back
before it exits; so this works wherever fusermount3 does, root or not.

Options are keyword arguments turned into one `-o` string, each as its option's declaration
says, and validated by `MountOptions.parse` before anything starts, so a bad one raises the
same `OptionError` the command prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .daemon.mountpoint import answering, mount_device, unescape
from .daemon.parent import PARENT_VARIABLE, WORKDIR_VARIABLE
from .errors import MountError

if TYPE_CHECKING:
    from .declared import Option

MOUNT_SECONDS = 60.0
# The daemon retries a failing final write-back for a minute (daemon.FINAL_FLUSH_SECONDS).
UNMOUNT_SECONDS = 120.0
BUSY_SECONDS = 5.0
_ROUTINE = ("DEBUG ", "INFO ", "WARNING ")


class Mount:
    """A mounted source: `.path`, `.stats()`, `.log()`, `.unmount()`; a context manager that
    unmounts when the block ends. `.metrics_address`: where its Prometheus metrics are served
    (`HOST:PORT`, the port bound when 0 was asked for; None without `metrics=`)."""

    def __init__(self, source: str, mountpoint: Path | None, option_text: str, *,
                 outlive: bool = False) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="zarrfs-"))
        self._temporary = mountpoint is None
        self.path = (self._workdir / "mnt") if mountpoint is None else Path(mountpoint).absolute()
        if self._temporary:
            self.path.mkdir()
        self.log_path = self._workdir / "daemon.log"
        self._final_log: str | None = None
        self.metrics_address: str | None = None
        # A mount already there is not ours to clear if ours fails (its daemon may be stuck).
        self._mounted_before = mount_device(str(self.path))
        self.process = self._start(source, option_text, outlive=outlive)

    # -- starting ---------------------------------------------------------------------------

    def _start(self, source: str, option_text: str, *, outlive: bool) -> subprocess.Popen[bytes]:
        address = f"\0zarrfs-api-{os.getpid()}-{secrets.token_hex(8)}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as ready, \
                open(self.log_path, "wb") as log_file:
            ready.bind(address)
            command = [sys.executable, "-m", "zarrfs.cli", "mount", "-f", source, str(self.path)]
            if option_text:
                command += ["-o", option_text]
            # Abstract socket names start with a NUL byte; NOTIFY_SOCKET spells it "@".
            env = {**os.environ, "NOTIFY_SOCKET": "@" + address[1:], **self._ending(outlive)}
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                self._wait_ready(process, ready)
            except BaseException:
                self._abandon(process)
                raise
        return process

    def _ending(self, outlive: bool) -> dict[str, str]:
        """What the daemon is told of this process: unless it is to outlive it, the mount ends
        (written back, unmounted, its temporary directory removed) when this process does."""
        if outlive:
            return {}
        return {PARENT_VARIABLE: str(os.getpid()),
                **({WORKDIR_VARIABLE: str(self._workdir)} if self._temporary else {})}

    def _wait_ready(self, process: subprocess.Popen[bytes], ready: socket.socket) -> None:
        """Until the daemon says READY=1 (serving) or exits (it could not mount)."""
        exited = os.pidfd_open(process.pid)
        try:
            deadline = time.monotonic() + MOUNT_SECONDS
            while (left := deadline - time.monotonic()) > 0:
                readable, _, _ = select.select([ready.fileno(), exited], [], [], left)
                if ready.fileno() in readable and self._notified(ready.recv(4096)):
                    return
                if exited in readable:
                    process.wait()
                    raise MountError(self._last_words("the daemon exited before mounting"))
            raise MountError(f"{self.path}: the daemon did not mount within {MOUNT_SECONDS:g} s "
                             f"({self._last_words('it wrote nothing')})")
        finally:
            os.close(exited)

    def _notified(self, message: bytes) -> bool:
        """Take in one sd_notify message (`NAME=value` lines); whether it says READY."""
        fields = dict(line.partition("=")[::2] for line in message.decode(errors="replace").splitlines())
        self.metrics_address = fields.get("X_ZARRFS_METRICS", self.metrics_address)
        return fields.get("READY") == "1"

    def _abandon(self, process: subprocess.Popen[bytes]) -> None:
        """After a failed start: no daemon, no mount, no temporary directory left behind."""
        if process.poll() is None:
            process.kill()
            process.wait()
        if mount_device(str(self.path)) != self._mounted_before:
            subprocess.run(["fusermount3", "-u", "-z", str(self.path)], capture_output=True)
        self._remove_workdir()

    # -- using ------------------------------------------------------------------------------

    @property
    def mounted(self) -> bool:
        return self.process.poll() is None and _is_mounted(self.path)

    def stats(self) -> dict[str, Any]:
        """The mount's counters and cache figures, as `zarrfs stats --json` prints them."""
        return read_stats(self.path)

    def log(self) -> str:
        """What the daemon has written to its log so far."""
        if self._final_log is not None:
            return self._final_log
        return self.log_path.read_text(errors="replace")

    # -- ending -----------------------------------------------------------------------------

    def unmount(self, timeout: float = UNMOUNT_SECONDS) -> None:
        """Unmount, then wait for the daemon to write everything back and exit. MountError if
        the mount stays busy, if the daemon does not exit within `timeout` (it is left
        running: it may still be writing back; call again to wait longer), or if its final
        write-back failed."""
        if self.process.poll() is None and _is_mounted(self.path):
            self._fusermount()
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise MountError(f"{self.path}: the daemon (pid {self.process.pid}) did not exit "
                             f"within {timeout:g} s of unmounting; its log: {self.log_path}") from None
        if _is_mounted(self.path):  # a daemon that died leaves its mount behind
            subprocess.run(["fusermount3", "-u", "-z", str(self.path)], capture_output=True)
        self._final_log = self.log_path.read_text(errors="replace")
        self._remove_workdir()
        if status != 0:
            raise MountError(self._failure(status))

    def _fusermount(self) -> None:
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            result = subprocess.run(["fusermount3", "-u", str(self.path)], capture_output=True,
                                    text=True)
            if result.returncode == 0 or not _is_mounted(self.path):
                return
            if time.monotonic() > deadline:
                raise MountError(f"cannot unmount {self.path}: {result.stderr.strip()} "
                                 "(close the files and memory maps open on it)")
            time.sleep(0.1)  # busy: a file of the caller's may still be closing

    def _failure(self, status: int) -> str:
        if status < 0:
            return f"{self.path}: the daemon was killed by signal {-status}; unsaved writes are lost"
        return self._last_words(f"the daemon exited with status {status}")

    def _last_words(self, fallback: str) -> str:
        """The daemon's one-line reason: the last line it wrote that is not a log line of
        INFO or WARNING, without its `zarrfs: ` prefix (and `ERROR `)."""
        lines = [line.strip().removeprefix("zarrfs: ") for line in self.log().splitlines()]
        reasons = [line for line in lines if line and not line.startswith(_ROUTINE)]
        return reasons[-1].removeprefix("ERROR ") if reasons else fallback

    def _remove_workdir(self) -> None:
        if self._temporary and not _is_mounted(self.path):
            with contextlib.suppress(OSError):
                self.path.rmdir()  # rmdir, not rmtree: never delete through a mount
        if not self._temporary or not _is_mounted(self.path):  # (never delete through a mount)
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> Mount:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.unmount()

    def __repr__(self) -> str:
        return f"<zarrfs mount {self.path}>"


def mount(source: str | os.PathLike[str], mountpoint: str | os.PathLike[str] | None = None, *,
          outlive: bool = False, **options: Any) -> Mount:
    """Mount `source` (a path or URL, as for `zarrfs mount`) on `mountpoint` (an existing
    directory; default a new temporary one, removed at unmount) and return once it serves.
    The mount ends, written back, when this process does, unless `outlive` (then it serves
    until unmounted).

    Options are the `-o` options as keyword arguments: `ro=True`, `cache="1G"`,
    `recheck="never"`, `timeout=10`, `endpoint_url="http://..."`, `views=["npy", "vrt"]`,
    `umask=0o022`... OptionError for a bad one, MountError (with the daemon's message) if the
    source cannot be mounted."""
    from .options import MountOptions  # the store's imports (fsspec): not for `import zarrfs`

    option_text = options_text(options)
    MountOptions.parse([option_text])
    return Mount(os.fspath(source), None if mountpoint is None else Path(mountpoint), option_text,
                 outlive=outlive)


def options_text(options: dict[str, Any]) -> str:
    """Keyword arguments as one `-o` string, each written as its option's declaration says
    (`zarrfs.options.DECLARED`): True gives a flag or a word (`anon`, `ro`), False a word's
    other one (`ro=False` is `rw`) or nothing (a flag's default); a true-or-false option is
    `name=true` or `name=false`; an octal one is written in octal (`umask=0o027`); a sequence is
    colon-separated (`views=[]` is `views=none`); None leaves an option out. OptionError: a
    value the option cannot take (True or False for a valued one, a comma)."""
    from .options import DECLARED, OptionError

    parts = []
    for name, value in options.items():
        text = None if value is None else _option(DECLARED.named(name), name, value)
        if text is None:
            continue
        if "," in text:
            raise OptionError(f"option {name}: no commas in a value ({value!r})")
        parts.append(text)
    return ",".join(parts)


def _option(option: Option[Any] | None, name: str, value: Any) -> str | None:
    """`name=value` as `option` takes it (None: no option of that name, which the parse of
    the text refuses)."""
    if isinstance(value, bool):
        return name if option is None else _truth(option, name, value)
    if option is not None and option.type == "octal" and isinstance(value, int):
        return f"{name}={value:o}"
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | os.PathLike):
        items = [str(item) for item in value]
        return f"{name}={':'.join(items) if items else 'none'}"
    return f"{name}={os.fspath(value) if isinstance(value, os.PathLike) else value}"


def _truth(option: Option[Any], name: str, value: bool) -> str | None:
    """True or False for `option`: `name=true`/`name=false` where it takes either; a word
    (True) or the other of its two words (False); a flag left out (False)."""
    from .options import OptionError

    if option.type == "boolean":
        return f"{name}={'true' if value else 'false'}"
    if name not in option.words:
        raise OptionError(f"option {name} takes {' or '.join(option.forms)}, not {value!r}")
    others = [word for word in option.words if word != name]
    return name if value else (others[0] if len(others) == 1 else None)


def _is_mounted(path: Path) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(unescape(line.split()[1]) == target for line in f)


def read_stats(mountpoint: str | Path) -> dict[str, Any]:
    """The counters and cache figures of the zarrfs mounted at `mountpoint`."""
    from .options import STATS_XATTR  # (options imports the store's fsspec: not for `import zarrfs`)

    try:
        text = answering(mountpoint, lambda: os.getxattr(mountpoint, STATS_XATTR))
        counters: dict[str, Any] = json.loads(text)
    except OSError as e:
        raise MountError(f"{mountpoint}: not a zarrfs mount ({e.strerror})") from None
    return counters

"""The state of one benchmark run: its options, directories, results and mounts."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .arrays import Config
from .common import MB, T_RSS_SLACK, fs_type, join_opts, log, median, parse_size, settle, warm_files
from .mounting import Mount, MountError


@dataclass
class Results:
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # config name -> metrics
    errors: list[str] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    shard: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # "v2"/"v3" -> figures
    small: dict[str, dict[str, Any]] = field(default_factory=dict)  # array -> figures

    def add(self, cfg: str, key: str, value: Any) -> None:
        self.rows.setdefault(cfg, {}).setdefault(key, []).append(value)

    def values(self, cfg: Config, key: str) -> list[Any]:
        return list(self.rows.get(cfg.name, {}).get(key, []))

    def mbps(self, cfg: Config, key: str) -> float | None:
        """MB/s of the median of the seconds recorded under `key` (None if none were)."""
        t = median(self.values(cfg, key))
        return cfg.nbytes / t / MB if t else None

    def peak(self, cfg: Config, key: str) -> int | None:
        xs = self.values(cfg, key)
        return max(xs) if xs else None

    def err(self, what: str, e: BaseException) -> None:
        msg = f"{what}: {type(e).__name__}: {e}"
        log("ERROR", msg)
        self.errors.append(msg)


class Bench:
    """The run's options and places; `mount` makes every benchmark mount with the same
    options (cache= from --cache first, then --mount-opts)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.res = Results()
        self.zarrfs_ok = not args.skip_zarrfs
        self.mount_failures = 0
        base = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir())
        if fs_type(base) in ("tmpfs", "ramfs"):
            base = Path("/var/tmp")
        self.work = Path(tempfile.mkdtemp(prefix="zarrfs-bench-", dir=base))
        args.data_dir = args.data_dir or str(base / "zarrfs-bench-data")  # kept: cached groups
        _remove_stale_shm()
        self.shm = Path(tempfile.mkdtemp(prefix=f"{SHM_PREFIX}{os.getpid()}-", dir="/dev/shm"))
        self.mnt = self.work / "mnt"
        self.mnt.mkdir()
        # Daemon output, kept after the run (the work directory is not); one file a run.
        self.logfile = Path(tempfile.gettempdir()) / f"{self.work.name}-daemon.log"
        self.logfile.write_bytes(b"")
        self.configs: list[Config] = []
        self.s3_config: Config | None = None  # the array also read from S3
        self.nmount = 0
        self.elapsed = 0.0

    def mount_opts(self, *extra: str) -> str:
        return join_opts(f"cache={self.args.cache}", self.args.mount_opts, *extra)

    @property
    def cache_bytes(self) -> int:
        """The daemons' cache: the last cache= of the options every mount gets."""
        caches = [o.split("=", 1)[1] for o in self.mount_opts().split(",") if o.startswith("cache=")]
        return parse_size(caches[-1])

    @property
    def rss_target(self) -> int:
        return self.cache_bytes + T_RSS_SLACK

    def mountpoint(self) -> Path:
        self.nmount += 1
        return self.mnt / f"m{self.nmount}"

    def mount(self, source: Path | str, *extra_opts: str, **kw: Any) -> Mount:
        return Mount(
            self.args.zarrfs,
            source,
            self.mountpoint(),
            self.mount_opts(*extra_opts),
            logfile=self.logfile,
            rss_limit=self.args.rss_kill,
            **kw,
        )

    def zarrfs_try(self, what: str, fn: Callable[..., Any], *a: Any) -> Any:
        """Run one zarrfs measurement; errors are recorded, and after 3 failed mounts in a
        row the remaining zarrfs measurements are skipped."""
        if not self.zarrfs_ok:
            return None
        try:
            out = fn(*a)
            self.mount_failures = 0
            return out
        except MountError as e:
            self.res.err(what, e)
            self.mount_failures += 1
            if self.mount_failures >= 3:
                log("zarrfs does not mount; skipping the remaining zarrfs measurements")
                self.zarrfs_ok = False
        except Exception as e:
            self.res.err(what, e)
        return None

    def fresh_copy(self, cfg: Config, name: str) -> Path:
        """A copy of the array's directory to write into, its files in the page cache and
        on disk (see settle)."""
        dst = self.work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(cfg.path, dst)
        warm_files(dst)
        settle()
        return dst

    def cleanup(self) -> None:
        for m in list(Mount.active):
            with contextlib.suppress(Exception):
                m.close()
        if self.args.keep:
            log(f"kept {self.work} and {self.shm}")
            return
        shutil.rmtree(self.shm, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


SHM_PREFIX = "zarrfs-bench-"


def _remove_stale_shm() -> None:
    """Raw copies left on /dev/shm by runs that were killed (SIGKILL leaves no time to
    clean up): up to 1 GiB of the machine's memory each. A copy is stale once the process
    named in it is gone."""
    for leftover in Path("/dev/shm").glob(f"{SHM_PREFIX}*-*"):
        pid = leftover.name[len(SHM_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            log(f"removing {leftover}, left by a run that was killed")
            shutil.rmtree(leftover, ignore_errors=True)

"""A fault-injecting fsspec filesystem: wraps another filesystem and, by rule, makes calls fail,
hang or return short data.

The rules, their JSON form and how they are matched, are faulty_rules.py's.

Two ways to use it
------------------
In a test, build it directly around any filesystem and read the counters::

    fs = FaultyFileSystem(fs=fsspec.filesystem("memory"), rules=[...])
    store = Store(fs, "/arr", retry=RetryPolicy(deadline_seconds=0.5))
    ... fs.faults["flaky-chunks"], fs.calls["cat_file"]

From a separately started process (a zarrfs daemon), describe everything in a JSON file and name
it in the environment variable ``ZARRFS_FAULTY_CONFIG``::

    {"target_protocol": "file", "target_options": {"auto_mkdir": true},
     "seed": 0, "counters_file": "/tmp/run/counters.json", "rules": [...]}

then open ``faulty:///abs/path`` (the path is handed to the target unchanged), or chain it in
front of any URL, ``faulty::s3://bucket/array``, where fsspec supplies the target. The file is
read again whenever it changes (inode, mtime or size; `write_config` replaces it), so a test can
arm and disarm faults while the daemon runs (a hang ends early once its rule is gone).
Counters go to ``counters_file`` after each injected fault.

The process must register the protocol first: run it as
``python -m tests.helpers.faulty_fs <module> [args...]`` (e.g. ``zarrfs.cli mount ...``),
which registers ``faulty`` and then runs ``<module>`` as ``__main__``, or call `register()`.
`child_env` gives such a child the import path it needs.
"""

from __future__ import annotations

import errno as errno_module
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import fsspec
from fsspec.implementations.chained import ChainedFileSystem
from fsspec.spec import AbstractFileSystem

from tests.helpers.faulty_rules import Rule, parse_rules

PROTOCOL = "faulty"
CONFIG_ENV = "ZARRFS_FAULTY_CONFIG"
IMPORT_PATH = "tests.helpers.faulty_fs.FaultyFileSystem"  # how fsspec finds the class



class FaultyFileSystem(ChainedFileSystem):
    """Wraps a filesystem; `cat_file`, `pipe_file`, `rm_file`, `info` and `find` obey the rules.

    Other methods are passed to the target untouched (through `__getattr__` for anything
    `AbstractFileSystem` does not define, and explicitly for the few it would otherwise
    implement in terms of the faulty five).
    """

    protocol = PROTOCOL  # type: ignore[assignment]
    cachable = False  # every open gets its own rules and counters

    def __init__(
        self,
        fs: AbstractFileSystem | None = None,
        rules: Iterable[Mapping[str, Any] | Rule] | None = None,
        *,
        config_path: str | None = None,
        target_protocol: str | None = None,
        target_options: Mapping[str, Any] | None = None,
        fo: str | None = None,  # the chained URL's path; fsspec passes it, we need not
        seed: int | None = None,
        counters_file: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._lock = threading.RLock()
        self.calls: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self._config_path = config_path
        if self._config_path is None and rules is None and fs is None:
            self._config_path = os.environ.get(CONFIG_ENV)
        self._config_signature: tuple[int, int, int] | None = None
        config = self._read_config() if self._config_path else {}
        if fs is None:
            configured = config.get("target_protocol", "file")
            protocol = target_protocol or configured
            # The config's target options are for its own target, not for a chained URL's.
            options = dict(config.get("target_options", {})) if protocol == configured else {}
            options.update(target_options or {})
            fs = fsspec.filesystem(protocol, **options)
        self.fs = fs
        self.counters_file = counters_file or config.get("counters_file")
        self._random = random.Random(seed if seed is not None else config.get("seed", 0))
        self.rules: list[Rule] = []
        if rules is not None:
            self.set_rules(rules)
        elif config:
            self.set_rules(config.get("rules", []))

    # -- rules -------------------------------------------------------------------------------

    def set_rules(self, rules: Iterable[Mapping[str, Any] | Rule]) -> None:
        """Replace the rules (their counts start again; the counters do not)."""
        parsed = [r if isinstance(r, Rule) else Rule.from_json(r, i) for i, r in enumerate(rules)]
        with self._lock:
            self.rules = parsed

    def clear_rules(self) -> None:
        self.set_rules([])

    def _read_config(self) -> dict[str, Any]:
        assert self._config_path is not None
        with open(self._config_path, "rb") as f:
            self._config_signature = _signature(os.fstat(f.fileno()))
            doc = json.load(f)
        if not isinstance(doc, dict):
            raise ValueError(f"{self._config_path}: expected a JSON object")
        parse_rules(doc.get("rules", []))  # fail early on a bad file
        return doc

    def _reload_if_changed(self) -> bool:
        """Re-read the config file when it changed; True when the rules were replaced."""
        if self._config_path is None:
            return False
        try:
            signature: tuple[int, int, int] | None = _signature(os.stat(self._config_path))
        except FileNotFoundError:
            signature = None
        if signature == self._config_signature:
            return False
        with self._lock:
            if signature is None:
                self._config_signature = None
                self.rules = []
            else:
                self.set_rules(self._read_config().get("rules", []))
        return True

    @property
    def injected(self) -> int:
        """Faults injected so far, over all rules."""
        return sum(self.faults.values())

    # -- the faulty five ---------------------------------------------------------------------

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kw: Any
    ) -> bytes:
        rule = self._before("cat_file", path)
        data: bytes = self.fs.cat_file(path, start=start, end=end, **kw)
        if rule is not None and rule.action == "short":
            data = data[: rule.shorten(len(data))]
        return data

    def pipe_file(self, path: str, value: bytes, **kw: Any) -> None:
        self._before("pipe_file", path)
        self.fs.pipe_file(path, value, **kw)

    def rm_file(self, path: str) -> None:
        self._before("rm_file", path)
        self.fs.rm_file(path)

    def info(self, path: str, **kw: Any) -> dict[str, Any]:
        rule = self._before("info", path)
        info: dict[str, Any] = dict(self.fs.info(path, **kw))
        if rule is not None and rule.action == "short" and info.get("size") is not None:
            info["size"] = rule.shorten(int(info["size"]))
        return info

    def find(self, path: str, *args: Any, **kw: Any) -> Any:
        self._before("find", path)
        return self.fs.find(path, *args, **kw)

    def _before(self, method: str, path: str) -> Rule | None:
        """Count the call and apply the first matching armed rule. Returns a "short" rule
        for the caller to apply to the result; raises for "error"; sleeps for "hang"."""
        self._reload_if_changed()
        with self._lock:
            self.calls[method] += 1
            rule = self._match(method, path)
            if rule is None:
                return None
            rule.fired += 1
            self.faults[rule.name] += 1
        self._write_counters()
        if rule.action == "error":
            raise rule.make_error(method, path)
        if rule.action == "hang":
            self._hang(rule)
            if rule.then == "error":
                raise TimeoutError(errno_module.ETIMEDOUT, f"injected hang {rule.name!r}", path)
            return None
        return rule

    def _match(self, method: str, path: str) -> Rule | None:
        for rule in self.rules:
            if not rule.applies(method, path) or not rule.armed():
                continue
            rule.seen += 1
            if rule.seen <= rule.skip:
                return None
            if rule.probability < 1.0 and self._random.random() >= rule.probability:
                return None
            return rule
        return None

    def _hang(self, rule: Rule) -> None:
        """Sleep for the rule's seconds, or until no hang rule of that name is left."""
        deadline = time.monotonic() + rule.seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
            self._reload_if_changed()
            with self._lock:
                if not any(r.name == rule.name and r.action == "hang" for r in self.rules):
                    return

    def _write_counters(self) -> None:
        if not self.counters_file:
            return
        with self._lock:
            doc = {"calls": dict(self.calls), "faults": dict(self.faults)}
        temp = f"{self.counters_file}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(temp, "w") as f:
            json.dump(doc, f)
        os.replace(temp, self.counters_file)

    # -- pass-through ------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :]
        stripped = path.rstrip("/")
        return stripped if stripped or not path else "/"

    def ls(self, path: str, detail: bool = True, **kw: Any) -> Any:
        return self.fs.ls(path, detail=detail, **kw)

    def _open(self, path: str, mode: str = "rb", **kw: Any) -> Any:
        return self.fs._open(path, mode=mode, **kw)

    def mkdir(self, path: str, create_parents: bool = True, **kw: Any) -> None:
        self.fs.mkdir(path, create_parents=create_parents, **kw)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.fs.makedirs(path, exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        self.fs.rmdir(path)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes this class and AbstractFileSystem lack.
        if name == "fs":
            raise AttributeError(name)
        return getattr(self.fs, name)


def _signature(stat: os.stat_result) -> tuple[int, int, int]:
    """What changes when the config file is rewritten (write_config replaces the file)."""
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def read_counters(path: str) -> dict[str, dict[str, int]]:
    """The counters a (possibly other) process wrote to its `counters_file`."""
    try:
        with open(path) as f:
            doc: dict[str, dict[str, int]] = json.load(f)
    except FileNotFoundError:
        return {"calls": {}, "faults": {}}
    return doc


def write_config(path: str, rules: Iterable[Mapping[str, Any]], **settings: Any) -> None:
    """Write a config file atomically (a running daemon picks it up on its next call)."""
    rules = list(rules)
    parse_rules(rules)
    doc = {**settings, "rules": rules}
    temp = f"{path}.tmp"
    with open(temp, "w") as f:
        json.dump(doc, f, indent=1)
    # A rewrite within the same mtime tick would go unnoticed; make the change visible.
    old = os.stat(path).st_mtime_ns if os.path.exists(path) else None
    os.replace(temp, path)
    if old is not None and os.stat(path).st_mtime_ns == old:
        os.utime(path, ns=(old + 1000, old + 1000))


def child_env(**extra: str) -> dict[str, str]:
    """An environment for a child process that imports ``tests.helpers`` and zarrfs."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, **extra}
    paths = [repo, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def register() -> None:
    """Make ``faulty://`` and ``faulty::<url>`` known to fsspec in this process."""
    fsspec.register_implementation(PROTOCOL, IMPORT_PATH, clobber=True)


def main(argv: list[str]) -> None:
    """``python -m tests.helpers.faulty_fs MODULE [ARGS...]``: register, then run MODULE."""
    import runpy
    import sys

    if not argv:
        raise SystemExit("usage: python -m tests.helpers.faulty_fs MODULE [ARGS...]")
    register()
    sys.argv = argv
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])

"""The fault rules of faulty_fs.py's filesystem: which calls a rule applies to, and what it
makes of them (fail, hang or return short data).

Rules
-----
A rule says which calls it applies to and what happens to them::

    {"name": "flaky-chunks",          # for the counters; defaults to "rule<N>"
     "methods": ["cat_file"],         # any of cat_file, pipe_file, rm_file, info, find; default all
     "pattern": "*/c/0/*",            # fnmatch glob on the target path; default "*"
     "action": "error",               # "error", "hang" or "short"
     "skip": 0,                       # let this many matching calls through first
     "times": 2,                      # fault this many matching calls, then disarm; null = forever
     "probability": 1.0,              # fault a matching call with this chance (seeded)
     "exception": "OSError",          # error: OSError, TimeoutError, ConnectionError,
                                      #   PermissionError or FileNotFoundError
     "errno": "EIO",                  # error: the errno name
     "seconds": 5.0,                  # hang: how long, at most; then the call goes ahead
     "then": "proceed",               # hang: "proceed" or "error" (a TimeoutError) after it
     "keep_bytes": 10, "drop_bytes": 3}  # short: keep the first N bytes / drop the last N
                                      #   (cat_file: data; info: the reported size)

Rules are matched in order; the first armed rule that matches a call decides it.
"""

from __future__ import annotations

import errno as errno_module
import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

METHODS = ("cat_file", "pipe_file", "rm_file", "info", "find")
_EXCEPTIONS: dict[str, type[OSError]] = {
    "OSError": OSError,
    "TimeoutError": TimeoutError,
    "ConnectionError": ConnectionError,
    "PermissionError": PermissionError,
    "FileNotFoundError": FileNotFoundError,
}
_SHORT_METHODS = {"cat_file", "info"}


@dataclass
class Rule:
    """One fault rule; see the module docstring for the JSON form."""

    name: str
    methods: frozenset[str] = frozenset(METHODS)
    pattern: str = "*"
    action: str = "error"
    skip: int = 0
    times: int | None = None
    probability: float = 1.0
    exception: str = "OSError"
    errno: str = "EIO"
    seconds: float = 5.0
    then: str = "proceed"
    keep_bytes: int | None = None
    drop_bytes: int | None = None
    # Run-time state: matching calls seen and faults injected.
    seen: int = field(default=0, compare=False)
    fired: int = field(default=0, compare=False)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], position: int) -> Rule:
        known = {f for f in cls.__dataclass_fields__ if f not in ("seen", "fired")}
        unknown = set(doc) - known
        if unknown:
            raise ValueError(f"fault rule {position}: unknown members {sorted(unknown)}")
        values = dict(doc)
        values.setdefault("name", f"rule{position}")
        if "methods" in values:
            values["methods"] = frozenset(values["methods"])
        rule = cls(**values)
        rule.check()
        return rule

    def check(self) -> None:
        where = f"fault rule {self.name!r}"
        if not self.methods <= set(METHODS):
            raise ValueError(f"{where}: methods must be among {METHODS}")
        if self.action not in ("error", "hang", "short"):
            raise ValueError(f"{where}: unknown action {self.action!r}")
        if self.action == "error" and self.exception not in _EXCEPTIONS:
            raise ValueError(f"{where}: unknown exception {self.exception!r}")
        if not hasattr(errno_module, self.errno):
            raise ValueError(f"{where}: unknown errno {self.errno!r}")
        if self.action == "hang" and self.then not in ("proceed", "error"):
            raise ValueError(f"{where}: 'then' must be 'proceed' or 'error'")
        if self.action == "short":
            if not self.methods <= _SHORT_METHODS:
                raise ValueError(f"{where}: short data applies to {sorted(_SHORT_METHODS)} only")
            if (self.keep_bytes is None) == (self.drop_bytes is None):
                raise ValueError(f"{where}: give exactly one of keep_bytes and drop_bytes")

    def applies(self, method: str, path: str) -> bool:
        return method in self.methods and fnmatch.fnmatchcase(path, self.pattern)

    def armed(self) -> bool:
        return self.times is None or self.fired < self.times

    def make_error(self, method: str, path: str) -> OSError:
        code = getattr(errno_module, self.errno)
        exc = _EXCEPTIONS[self.exception]
        return exc(code, f"injected fault {self.name!r} in {method}", path)

    def shorten(self, size: int) -> int:
        if self.keep_bytes is not None:
            return min(size, self.keep_bytes)
        assert self.drop_bytes is not None
        return max(0, size - self.drop_bytes)


def parse_rules(docs: Iterable[Mapping[str, Any]]) -> list[Rule]:
    return [Rule.from_json(doc, i) for i, doc in enumerate(docs)]

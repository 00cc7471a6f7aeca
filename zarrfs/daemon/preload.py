"""What a daemon of `-o user=NAME` loads while it is root, before it acts as NAME.

NAME may not be able to read the Python the daemon runs on: a pyenv or conda Python, or a
virtual environment, in root's home (mode 0700). Whatever that Python loads once the daemon
acts as NAME, it loads as NAME, and fails: an import raises, or is taken for a package that is
not installed (a client falls back to a slower one, a codec is unknown). What the daemon
imports to start (zarrfs.daemon.run and everything it imports) is loaded by then; what a mount
imports only when its source or its arrays need it is imported first: what its arrays need is
listed here, what its store needs the store says (`zarrfs.store.late_imports`). (Found by
mounting as NAME with an audit hook on imports and opens, reading every file of the mount;
tests/daemon/test_user_option_private.py mounts from a Python NAME cannot read.)

What still cannot be loaded as NAME fails the mount with a line naming NAME and the path NAME
cannot reach (`unreachable`), not as a package missing.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys

from ..store import SourceOptions, late_imports
from .privileges import Identity

log = logging.getLogger("zarrfs")

# Any array: numcodecs' blosc takes a multiprocessing lock at its first use, importing
# multiprocessing.synchronize then (a group's blosc array: at its first lookup, as NAME).
ALWAYS = ("multiprocessing.synchronize",)


def before_acting(source: str, options: SourceOptions) -> None:
    """Import what opening and serving `source` (with `options`) imports later (as root, before
    acting as the user: call it then). What is not installed is left to the store to report."""
    late = late_imports(source, options)
    for name in (*ALWAYS, *late.modules):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if late.reference:
        _codec_entry_points()


# What views import at their first use, and cost too much to import for every mount; imported
# only for a user who could not import them: pyproj (~0.4 s: the GeoTIFF keys of a CRS given as
# a code, which a group's array is met with only once served).
UNREACHABLE = ("pyproj",)


def as_user(identity: Identity) -> None:
    """Once acting as `identity`, before the store is opened: when the user cannot reach the
    Python the daemon runs on, say so, and import what a mount may need later (as root again,
    for the while: no other thread does anything as the user yet)."""
    blocked = _python_blocked()
    if blocked is None:
        return
    log.info("%s cannot reach %s, on the way to the Python zarrfs runs on (%s): what serving needs "
             "of it is loaded while the daemon is root", identity.name, blocked, sys.executable)
    with identity.root():
        for name in UNREACHABLE:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)


def _codec_entry_points() -> None:
    """The codecs numcodecs loads from other packages at their first use (its entry points:
    kerchunk's, which reference sets name), loaded now for a reference set: ~0.4 s."""
    from numcodecs import registry

    for name, entry in list(registry.entries.items()):
        if name not in registry.codec_registry:
            with contextlib.suppress(Exception):
                registry.register_codec(entry.load(), codec_id=name)


def unreachable(user: str, source: str | None = None) -> str | None:
    """What this process, acting as `user`, cannot enter or read, named in a line: the first
    place on the way to a local `source`, else to the Python the daemon runs on (its library
    and package directories); None when it reaches them all. (os.access asks as the real user:
    the one acted as.)"""
    if source is not None and "://" not in source and "::" not in source:
        blocked = _first_blocked(os.path.abspath(source))
        if blocked is not None:
            return f"-o user={user}: {user} cannot reach {blocked}"
    blocked = _python_blocked()
    if blocked is None:
        return None
    return (f"-o user={user}: {user} cannot reach {blocked}, on the way to the Python zarrfs runs on "
            f"({sys.executable}): install zarrfs where {user} may read it")


def _python_blocked() -> str | None:
    """The first place on the way to the Python's directories the daemon imported from (those
    of sys.path holding a module it loaded) that this process may not enter or read."""
    files = [f for m in list(sys.modules.values()) if isinstance(f := getattr(m, "__file__", None), str)]
    for path in dict.fromkeys(os.path.abspath(p) for p in sys.path if p):
        if any(f.startswith(path + os.sep) for f in files):
            blocked = _first_blocked(path)
            if blocked is not None:
                return blocked
    return None


def _first_blocked(path: str) -> str | None:
    """The first directory on the way to `path`, or `path`, that may not be entered or read;
    None when there is none (or `path` does not exist)."""
    parts = path.split(os.sep)
    for end in range(2, len(parts) + 1):
        step = os.sep.join(parts[:end])
        if not os.path.lexists(step):  # (not there: its directory could be entered)
            return None
        if not os.access(step, os.R_OK | (os.X_OK if os.path.isdir(step) else 0)):
            return step
    return None

"""The one life cycle of what a front end serves (a mount: `run`; a server: `serving`).

Started in one order: who the daemon acts as (`-o user=`) and what it loads while still root,
the decoding processes (forked while the daemon has one thread), then as the user: malloc
bounded, the store, the cache and threads the arrays share, the tree; once the front end is
bound (the kernel's mount, the HTTP port, both as root), root given up, the memory trimmer
started and, once serving, the temporaries of an interrupted write removed. Stopped in the
reverse order, from whichever step was reached, whatever failed: the trimmer, the final
write-back, the front end's own end (the unmount), the tree, the shared pieces, the store (and
the request log), the decoding processes. Each of these steps is called from here only
(tests/daemon/test_lifecycle_steps.py checks it); a front end brings only its own.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from ..array import DecodePool, Shared
from ..options import TreeOptions
from ..store import Store
from ..store.observe import Observers, RequestLog, StoreObserver
from ..tree import Tree
from . import preload, privileges
from .memory import Trimmer, bound_malloc
from .privileges import Identity
from .served import decoding, final_flush, open_tree, opened_store, remove_temporaries, shared_of

if TYPE_CHECKING:
    from .metrics import Metrics

Served = TypeVar("Served", bound=TreeOptions)  # (a mount's options are a tree's and the kernel's)


@dataclass(frozen=True)
class OpenedTree:
    """What a front end serves: the store, the pieces its arrays share, and the tree."""

    store: Store
    shared: Shared
    tree: Tree


class Lifecycle(Generic[Served]):
    """Everything a front end serves through, from `with` to its end (see the module)."""

    def __init__(self, source: str, options: Served) -> None:
        """MountError: `-o user=` names no one, or the daemon is not root to act as them."""
        self.source = source
        self.options = options
        self.identity = Identity.named(options.user, options.group)
        self.decoders: DecodePool | None = None
        self.stored = True  # (False: the final write-back gave up)
        self._opened: OpenedTree | None = None
        self._trim: Callable[[], int] | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Lifecycle[Served]:
        with self._stack:  # (closed again should the decoding processes not start)
            if self.identity is not None:
                preload.before_acting(self.source, self.options.source)  # (as root)
            # glibc's malloc set up before the fork, for the workers too (`open` sets it again,
            # and takes its trim): with glibc's defaults each chunk a worker encoded came in fresh
            # pages, ~180 page faults a 512 KiB chunk, 0.56 CPU s a 256 MiB write where 0.40 with these.
            bound_malloc()
            self.decoders = self._stack.enter_context(decoding(self.identity))
            self._stack = self._stack.pop_all()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stack.close()

    def callback(self, stop: Callable[[], object]) -> None:
        """`stop` at the end, before what was started until now is stopped (the front end's
        own end: the unmount after the final write-back, before the tree is closed)."""
        self._stack.callback(stop)

    def open(self, metrics: Metrics | None = None) -> OpenedTree:
        """The store, the shared pieces and the tree, opened as the user served
        (ZarrfsError: one cannot be opened; what was opened is closed at the end)."""
        if self.identity is not None:
            self.identity.act()
            preload.as_user(self.identity)
        self._trim = bound_malloc()
        store = opened_store(self.source, self.options, self._observer(metrics))
        self._stack.callback(store.close)
        store.prepare()
        shared = shared_of(store, self.options, self.decoders, self._trim)
        self._stack.callback(shared.close)
        if metrics is not None:
            metrics.watch(shared)
        tree = open_tree(store, shared, self.options.view_settings, rechecks=self.options.recheck is not None)
        self._stack.callback(tree.close)
        self._opened = OpenedTree(store, shared, tree)
        return self._opened

    def as_root(self) -> contextlib.AbstractContextManager[None]:
        """Root's rights for what binds the front end, while the daemon acts as a user who may
        take them back (nothing to take without one)."""
        return contextlib.nullcontext() if self.identity is None else self.identity.root()

    def start_serving(self) -> None:
        """Once the front end is bound, before it reads its first request: root given up for
        good, the trimmer started, and everything dirty written back at the end."""
        opened = self._started()
        if self.identity is not None:
            self.identity.drop()
        opened.shared.more_stats.append(privileges.stats)
        self._stack.callback(self._final_flush, opened.tree)
        if self._trim is not None:
            cache = opened.shared.cache
            self._stack.callback(Trimmer(self._trim, opened.shared.counters.activity,
                                         lambda: cache.freed_bytes).stop)

    def serving(self) -> None:
        """Once the front end serves: what it made to start out of the collector's walks
        (some 10^5 objects living as long as it does: a full collection of them stalled a read
        for 40-60 ms), the decoding processes forked, and what an interrupted write left in a
        writable store removed."""
        gc.freeze()
        if self.decoders is not None:
            self.decoders.start()
        store = self._started().store
        if not store.read_only:
            remove_temporaries(store)

    def _started(self) -> OpenedTree:
        if self._opened is None:
            raise RuntimeError("the life cycle serves nothing before `open`")
        return self._opened

    def _final_flush(self, tree: Tree) -> None:
        self.stored = final_flush(tree)

    def _observer(self, metrics: Metrics | None) -> StoreObserver | None:
        """What watches the store's operations: the metrics, and the request log when asked
        for (ZARRFS_REQUEST_LOG, closed after the store), both, or nothing."""
        requests = RequestLog.from_environment()
        if requests is not None:
            self._stack.callback(requests.close)
        watching = [o for o in (metrics, requests) if o is not None]
        return None if not watching else watching[0] if len(watching) == 1 else Observers(*watching)

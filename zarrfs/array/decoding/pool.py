"""The daemon's end of its decoding processes: jobs of encoded chunks go to the worker with the
fewest in flight, and a future per job says when its chunks are in their slab.

Decoding there leaves the daemon's interpreter lock to its request loop and its store reads
(docs/performance-history.md, "Cold reads against the bare floor": decoding threads in the daemon
waited half their time for the lock, which pyfuse3 holds while a reply is copied into the
kernel). Workers are forked by the fork server, one per core, once the mount serves (`start`:
a fork took 12 ms of a cold read's first slab, where two forks were its first 25 ms) or as
they are first needed.

A worker that dies (killed, the OOM killer) or stays silent past DEADLINE_SECONDS (it is then
killed) fails its jobs in flight with `WorkerFailed`: the reader falls back to the cache,
which decodes in the daemon (the same bytes, or EIO for a corrupt chunk), and the next job
gets a new worker. A chunk a worker cannot decode fails its job the same way. A job's slab is
never read unless the job succeeded."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import pickle
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...codecs import BytesLike, SentType
from ...errors import ZarrfsError
from ...store import Opened
from . import wire
from .files import ChunkFiles, FilesJob, FilesRead
from .server import ForkServer
from .slabs import SharedSlab

log = logging.getLogger(__name__)
DEADLINE_SECONDS = 10.0  # a job a worker has not answered by then: the worker is stopped


class WorkerFailed(ZarrfsError, OSError):
    """A decoding process failed a job (it died, or could not decode a chunk)."""


@dataclass(frozen=True)
class Item:
    """One encoded chunk (`data`, or the local file `opened`, which the worker reads), its
    decoder (a picklable callable: bytes -> the chunk), and where its elements go: `in_cell`
    of it into `in_box` of the slab seen as `shape` of `dtype`."""

    decoder: Any
    data: BytesLike
    slab: SharedSlab
    shape: tuple[int, ...]
    dtype: np.dtype[Any] | SentType  # (not `str`: it names ml_dtypes' types in another byte order as void)
    in_box: tuple[slice, ...]
    in_cell: tuple[slice, ...]
    opened: Opened | None = None


def close_files(items: Sequence[Item]) -> None:
    """The descriptors of items' files, closed (items never sent)."""
    for item in items:
        if item.opened is not None:
            with contextlib.suppress(OSError):
                os.close(item.opened.fd)


class _Link:
    """One worker: its socket (one sender at a time), what it was sent, its jobs in flight."""

    def __init__(self, pid: int, sock: socket.socket, pool: DecodePool) -> None:
        self.pid, self.sock = pid, sock
        self.send_lock = threading.Lock()
        self.decoders: set[bytes] = set()
        self.slabs: set[int] = set()
        self.pending: dict[int, tuple[Future[Any], float, list[Item]]] = {}
        self.alive = True
        threading.Thread(target=pool.listen, args=(self,), name=f"zarrfs-worker-{pid}", daemon=True).start()


class DecodePool:
    def __init__(self, server: ForkServer, workers: int) -> None:
        self.server = server
        self.size = workers
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._jobs = itertools.count(1)
        self._pickles: dict[int, tuple[Any, bytes, bytes]] = {}  # id -> (decoder, key, pickle)
        self._closed = False
        self.failures = 0
        self.usable = True  # (False once no worker could be forked: streams decode in the daemon)
        self._forgotten: queue.SimpleQueue[SharedSlab | None] = queue.SimpleQueue()
        threading.Thread(target=self._keep_deadlines, name="zarrfs-worker-deadlines", daemon=True).start()
        threading.Thread(target=self._tell_forgotten, name="zarrfs-worker-slabs", daemon=True).start()

    def start(self) -> None:
        """Fork the workers now, on a thread of their own (none are left to the first jobs)."""
        threading.Thread(target=self._fork_all, name="zarrfs-worker-start", daemon=True).start()

    def _fork_all(self) -> None:
        with self._lock:
            if self._closed:
                return
            with contextlib.suppress(WorkerFailed):  # (logged: the first jobs try again)
                while len(self._links) < self.size:
                    self._links.append(self._fork())

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [link.pid for link in self._links if link.alive]

    def submit(self, items: Sequence[Item]) -> Future[float]:
        """Decode `items` into their slabs; the future gives the worker's CPU seconds, or
        raises WorkerFailed."""
        try:
            return self._submit(lambda link, job: self._send_job(link, job, items), list(items))
        finally:
            close_files(items)  # (the worker has its own descriptors of them now)

    def read_files(self, files: ChunkFiles, directory: int, slab: SharedSlab,
                   job: FilesJob) -> Future[FilesRead]:
        """Read chunks of an array from its files below `directory` (lent by its store: closed
        here) into `slab`; the future gives what became of each, or raises WorkerFailed."""
        def send(link: _Link, number: int) -> None:
            self._introduce(link, [files], [slab])
            wire.send(link.sock, ("files", number, self.key_of(files), job), fds=[directory])

        try:
            return self._submit(send, [])
        finally:
            os.close(directory)

    def _submit(self, send: Callable[[_Link, int], None], held: list[Item]) -> Future[Any]:
        """A job sent by `send` to the worker with the fewest in flight (`held` until it ends)."""
        future: Future[Any] = Future()
        link = self._link()
        job = next(self._jobs)
        with link.send_lock:
            with self._lock:
                link.pending[job] = (future, time.monotonic(), held)
            try:
                send(link, job)
            except (OSError, wire.Closed) as e:
                self._lost(link, f"could not be sent a job ({e})")
        return future

    def submit_job(self, kind: str, body: Any, callables: Sequence[Any] = (),
                   slabs: Sequence[SharedSlab] = ()) -> Future[Any]:
        """A job of another kind than decoding (`(kind, job, body)`: zarrfs.array.decoding.
        encoding), naming `callables` by `key_of` and `slabs` by id, which are sent first where
        the worker has not got them; the future gives the worker's answer, or raises
        WorkerFailed (as does this call, when no worker can be had)."""
        def send(link: _Link, job: int) -> None:
            self._introduce(link, callables, slabs)
            wire.send(link.sock, (kind, job, body))

        return self._submit(send, [])

    def key_of(self, function: Any) -> bytes:
        """The key a worker knows a callable by (`submit_job`)."""
        return self._pickled(function)[1]

    def _introduce(self, link: _Link, callables: Sequence[Any], slabs: Sequence[SharedSlab]) -> None:
        """Send the worker the callables (their pickles) and slabs (their descriptors) it has not got."""
        for function in callables:
            _, key, pickled = self._pickled(function)
            if key not in link.decoders:
                wire.send(link.sock, ("decoder", key), [pickled])
                link.decoders.add(key)
        for slab in slabs:
            if slab.id not in link.slabs:
                wire.send(link.sock, ("slab", slab.id, slab.nbytes), fds=[slab.fd])
                link.slabs.add(slab.id)

    def _send_job(self, link: _Link, job: int, items: Sequence[Item]) -> None:
        self._introduce(link, [item.decoder for item in items], [item.slab for item in items])
        header = [(self._pickled(i.decoder)[1], i.slab.id, i.shape, i.dtype, i.in_box, i.in_cell, len(i.data),
                   None if i.opened is None else (i.opened.size, i.opened.offset, i.opened.crc32c))
                  for i in items]
        files = [item.opened.fd for item in items if item.opened is not None]
        wire.send(link.sock, ("decode", job, header), [item.data for item in items], fds=files)

    def _pickled(self, decoder: Any) -> tuple[Any, bytes, bytes]:
        """The decoder's pickle, made once per decoder object, and a key naming it (equal
        pipelines of many arrays share one in the workers)."""
        with self._lock:
            found = self._pickles.get(id(decoder))
        if found is None:
            pickled = pickle.dumps(decoder, protocol=pickle.HIGHEST_PROTOCOL)
            found = (decoder, hashlib.sha1(pickled).digest(), pickled)  # (holds it: its id stays its own)
            with self._lock:
                self._pickles[id(decoder)] = found
        return found

    def _link(self) -> _Link:
        """The live worker with the fewest jobs in flight, forking one while fewer than `size`."""
        with self._lock:
            if self._closed:
                raise WorkerFailed("the decoding processes are stopped")
            live = [link for link in self._links if link.alive]
            self._links = live
            if len(live) < self.size:
                live.append(self._fork())
            return min(live, key=lambda link: len(link.pending))

    def _fork(self) -> _Link:
        """A new worker (with the lock held), from a fork server started again if it ended."""
        try:
            try:
                pid, sock = self.server.fork_worker()
            except (OSError, wire.Closed) as e:
                log.warning("the fork server of the decoding processes ended (%s): it is started again", e)
                self.server = self.server.restarted()
                pid, sock = self.server.fork_worker()
        except (OSError, wire.Closed) as e:
            self.usable = False
            log.warning("no decoding process could be started (%s): chunks are decoded in the daemon", e)
            raise WorkerFailed(f"no decoding process could be started: {e}") from None
        return _Link(pid, sock, self)

    def listen(self, link: _Link) -> None:
        """A worker's answers, until its socket ends: then its jobs in flight fail."""
        try:
            while True:
                answer, _, _ = wire.receive(link.sock)
                with self._lock:
                    future, _, _ = link.pending.pop(answer[1])
                if answer[0] == "done":
                    future.set_result(answer[2])  # (a decoding job's: the worker's CPU seconds)
                else:
                    future.set_exception(WorkerFailed(f"a decoding process failed a chunk: {answer[3]}"))
        except (OSError, wire.Closed, KeyError):
            self._lost(link, "ended")

    def _lost(self, link: _Link, how: str) -> None:
        with self._lock:
            was_alive, link.alive = link.alive, False
            pending, link.pending = link.pending, {}
            failed = was_alive and not self._closed
            self.failures += failed
        with contextlib.suppress(OSError):
            link.sock.shutdown(socket.SHUT_RDWR)
        if failed:
            log.warning("decoding process %d %s: its %d jobs are read again in the daemon", link.pid, how,
                        len(pending))
        for future, _, _ in pending.values():
            future.set_exception(WorkerFailed(f"decoding process {link.pid} {how}"))

    def _keep_deadlines(self) -> None:
        while not self._closed:
            time.sleep(1.0)
            now = time.monotonic()
            with self._lock:
                late = [link for link in self._links if link.alive and any(
                    now - began > DEADLINE_SECONDS for _, began, _ in link.pending.values())]
            for link in late:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(link.pid, signal.SIGKILL)

    def forget_slab(self, slab: SharedSlab) -> None:
        """The workers are to let `slab` go (their mappings), and its descriptor is closed:
        told by a thread of its own, so that no caller waits on a busy worker's socket."""
        slab.close()
        self._forgotten.put(slab)

    def _tell_forgotten(self) -> None:
        while (slab := self._forgotten.get()) is not None:
            with self._lock:
                links = [link for link in self._links if link.alive and slab.id in link.slabs]
            for link in links:
                with link.send_lock, contextlib.suppress(OSError):
                    wire.send(link.sock, ("forget", slab.id))
                    link.slabs.discard(slab.id)

    def close(self) -> None:
        """Every worker ends (their sockets closed), then the fork server."""
        with self._lock:
            self._closed = True
            links, self._links = self._links, []
        self._forgotten.put(None)
        for link in links:
            with contextlib.suppress(OSError):
                link.sock.close()
        self.server.close()

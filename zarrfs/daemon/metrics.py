"""Prometheus metrics of one mount (`-o metrics=HOST:PORT`), served by the daemon over HTTP.

Latencies are observed where they happen: every FUSE request in `fuse.boundary`, every store
operation in `Store.call` (`store.observe`), each into a histogram child looked up once per
label set. Everything `zarrfs stats` shows (the mount's counters, what the cache holds) is
read when Prometheus scrapes, by a collector: nothing on the hot path. Each daemon has its
own registry (no process-wide state), and every series carries the `mount` label: the source
without credentials. docs/operations.md lists the series.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..errors import ZarrfsError
from ..store.observe import KINDS, TIMEOUT, Operation

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ..array import Shared

# From a cached read (~50 µs) to a store's whole deadline (30 s by default) and past it.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                   0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Who the daemon does its store I/O as (`-o user=`, `group=`): gauges without a unit.
IDS = {"uid": "The user the daemon reads and writes the store as", "gid": "The daemon's group"}
# `zarrfs stats` names that are not counters: what the cache holds now, and IDS.
GAUGES = {**IDS, "cache_bytes": "Bytes the chunk cache holds (clean, dirty and read-ahead)",
          "dirty_bytes": "Bytes written through the mount and not yet stored",
          "readahead_bytes": "Bytes of read-ahead buffers lent to readers",
          "cache_limit": "The cache's limit in bytes (-o cache=)",
          "disk_cache_bytes": "Bytes the disk cache holds (-o disk_cache=; every mount sharing it)"}


COUNTERS = {"requests": "FUSE requests answered", "errors": "FUSE requests failed by a fault",
            "cache_hits": "Chunks found in the cache", "cache_misses": "Chunks loaded from the store",
            "bytes_fetched": "Bytes read from the store", "bytes_stored": "Bytes written to the store",
            "chunks_decoded": "Chunks decoded", "chunks_encoded": "Chunks encoded",
            "chunks_encoded_in_processes": "Chunks encoded in the decoding processes",
            "decode_seconds": "Seconds spent decoding chunks",
            "encode_seconds": "Seconds spent encoding chunks",
            "write_conflicts": "Writes that found a chunk changed by another writer",
            "rechecks": "Checks of the store for changes by other writers",
            "chunks_changed_outside": "Chunks found changed by other writers",
            "timeouts": "FUSE requests that got no answer from the store within the deadline",
            "bytes_pushed": "Bytes put into the page cache ahead of sequential readers",
            "bytes_replied": "Bytes of files sent in answer to read requests",
            "disk_cache_hits": "Reads answered from the disk cache",
            "disk_cache_misses": "Reads the disk cache could not answer (read from the store)"}


class MetricsError(ZarrfsError):
    """The metrics endpoint could not be served (a port in use, an unknown host)."""


def public_source(source: str) -> str:
    """A source URL as a label: no `user:password@`, no query string (a presigned URL's
    signature) nor fragment, in each part of a chained URL (`simplecache::s3://...`)."""
    parts = [re.sub(r"[?#].*", "", part) for part in source.split("::")]
    return "::".join(re.sub(r"//[^/@\s]*@", "//", part) for part in parts)


class ConsistentRegistry(CollectorRegistry):
    """A registry whose scrape sees each store operation whole: the histogram and the counters
    one operation moves are updated under `updating`, and a scrape collects under it too (else
    a scrape between two families counts the timeouts that finished meanwhile in one and not
    the other: 16 against 7 seen under load). Collectors that take locks of their own (the
    cache's figures) are collected outside it, so a scrape never waits on them holding it."""

    def __init__(self) -> None:
        super().__init__()
        self.updating = threading.Lock()
        self._outside: list[_StatsCollector] = []

    def register_outside(self, collector: _StatsCollector) -> None:
        self._outside.append(collector)

    def collect(self) -> Iterator[Metric]:
        with self.updating:
            collected = list(super().collect())
        for collector in self._outside:
            collected += collector.collect()
        yield from collected


class Metrics:
    """The registry, histograms and HTTP server of one mount."""

    def __init__(self, source: str) -> None:
        self.mount = public_source(source)
        self.registry = ConsistentRegistry()
        self.in_flight = 0  # FUSE requests being answered (changed on the event loop only)
        fuse = Histogram("zarrfs_fuse_request_seconds", "Latency of FUSE requests, by operation",
                         ["mount", "operation"], registry=self.registry, buckets=LATENCY_BUCKETS)
        self._fuse_family = fuse
        self._fuse_children: dict[str, Histogram] = {}  # (operation -> its child, made once)
        self._store_family = Histogram("zarrfs_store_request_seconds",
                                       "Latency of store operations (retries included), by "
                                       "operation and outcome",
                                       ["mount", "operation", "outcome"], registry=self.registry,
                                       buckets=LATENCY_BUCKETS)
        # Histogram children are made as their label sets first occur (each is 21 series);
        # the counters an alert watches exist from the start (an increase needs a first 0).
        self._store: dict[tuple[str, str], Histogram] = {}
        retries = Counter("zarrfs_store_retries", "Store operations retried after a transient fault",
                          ["mount", "operation"], registry=self.registry)
        self._retries = {kind: retries.labels(self.mount, kind) for kind in KINDS}
        timeouts = Counter("zarrfs_store_timeouts", "Store operations that got no answer within "
                           "the deadline (-o timeout=)", ["mount", "operation"], registry=self.registry)
        self._timeouts = {kind: timeouts.labels(self.mount, kind) for kind in KINDS}
        self._store_in_flight = Gauge("zarrfs_store_requests_in_flight", "Store operations under way",
                                      ["mount"], registry=self.registry).labels(self.mount)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.address = ""

    # -- serving ---------------------------------------------------------------------------

    def serve(self, host: str, port: int) -> str:
        """Serve /metrics on host:port (port 0: a free one); the address bound, `HOST:PORT`.
        MetricsError when it cannot (the mount then fails with that message)."""
        try:
            self._server, self._thread = start_http_server(port, host, registry=self.registry)
        except OSError as e:
            raise MetricsError(f"cannot serve metrics on {host}:{port}: "
                               f"{e.strerror or e}") from None
        bound = self._server.server_address[1]
        self.address = f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"
        return self.address

    def watch(self, shared: Shared) -> None:
        """Report the counters and cache figures of `shared` (the mount's) at each scrape."""
        self.registry.register_outside(_StatsCollector(self.mount, shared.stats, lambda: self.in_flight))

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    # -- FUSE requests (fuse.boundary.Timings) ---------------------------------------------

    def begin(self) -> None:
        self.in_flight += 1

    def end(self, operation: str, seconds: float) -> None:
        self.in_flight -= 1
        child = self._fuse_children.get(operation)
        if child is None:
            child = self._fuse_children[operation] = self._fuse_family.labels(self.mount, operation)
        child.observe(seconds)

    # -- store operations (store.observe.StoreObserver) ------------------------------------

    def started(self) -> None:
        self._store_in_flight.inc()

    def finished(self, operation: Operation) -> None:
        kind, outcome = operation.kind, operation.outcome
        child = self._store.get((kind, outcome))
        if child is None:  # (two threads may both make it: labels() returns the same child)
            child = self._store[kind, outcome] = self._store_family.labels(self.mount, kind, outcome)
        with self.registry.updating:
            self._store_in_flight.dec()
            child.observe(operation.seconds)
            if outcome == TIMEOUT:
                self._timeouts[kind].inc()

    def retried(self, kind: str) -> None:
        self._retries[kind].inc()


class _StatsCollector:
    """`zarrfs stats` at scrape time: its counters as `zarrfs_NAME_total`, its cache figures
    as gauges, and the FUSE requests in flight."""

    def __init__(self, mount: str, stats: Callable[[], dict[str, float]],
                 in_flight: Callable[[], int]) -> None:
        self.mount = mount
        self.stats = stats
        self.in_flight = in_flight

    def collect(self) -> Iterator[Metric]:
        for name, value in self.stats().items():
            family: Metric
            if name in GAUGES:
                unit = "" if name.endswith("bytes") or name in IDS else "_bytes"
                family = GaugeMetricFamily(f"zarrfs_{name}{unit}", GAUGES[name], labels=["mount"])
            else:
                family = CounterMetricFamily(f"zarrfs_{name}", COUNTERS.get(name, name),
                                             labels=["mount"])
            family.add_metric([self.mount], value)
            yield family
        requests = GaugeMetricFamily("zarrfs_requests_in_flight", "FUSE requests being answered",
                                     labels=["mount"])
        requests.add_metric([self.mount], self.in_flight())
        yield requests

"""What the layers above may ask of a store, stated as data: no code outside `store/` asks
which backend a store is (`scripts/check_layers.py` holds the rule). Each driver states its
own (`driver.Driver.capabilities`), and every layer that cares reads them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    # Each request crosses a network: it has a deadline, worker threads wait on it (more of
    # them), and what is read ahead is priced in requests, not bytes.
    round_trips: bool
    # Several objects' GETs sent in one call cost less than one at a time (S3: a GET waited for
    # costs ~0.3 ms of Python beside the request; four at once ~0.1 ms each).
    batched_gets: bool
    # Its objects are files of this machine: a chunk can go to another process as its opened
    # file (nothing read in the daemon), a recheck is a stat, and its directory is the store.
    local_files: bool
    # A listing says what is stored (an HTTP server's is a page of links or an error: what
    # many keys are is asked key by key there).
    lists: bool

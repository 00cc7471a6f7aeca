"""What a driver can do, stated as one value: no code outside `store/` asks which backend a
store is (`scripts/check_layers.py` holds the rule), and no code asks a driver or its
filesystem what it has (a flag beside this value, an attribute probed). Each driver states its
own (`driver.Driver.capabilities`; the defaults are any fsspec filesystem's), the store reads
them (`Store.capabilities`), and every layer that cares reads them there."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    # Each request crosses a network: it has a deadline, worker threads wait on it (more of
    # them), and what is read ahead is priced in requests, not bytes.
    round_trips: bool = True
    # Several objects' GETs sent in one call cost less than one at a time (S3: a GET waited for
    # costs ~0.3 ms of Python beside the request; four at once ~0.1 ms each): the layers above
    # gather the chunks of a stream's job into one `read_many`. (A driver may batch objects
    # without this, its `batches`, where batching was not measured to pay: Azure.)
    batched_gets: bool = False
    # Its objects are files of this machine: a chunk can go to another process as its opened
    # file (nothing read in the daemon), a recheck is a stat, and its directory is the store.
    local_files: bool = False
    # A listing says what is stored (an HTTP server's is a page of links or an error: what
    # many keys are is asked key by key there).
    lists: bool = True
    # A listing of any directory, or of the names below it with a prefix, costs a request a
    # page (object stores): `many` lists rows of chunks; elsewhere it lists the whole node.
    lists_prefixes: bool = False
    # Puts and deletes honour `expect` (compare-and-swap); reads say the generation they read.
    conditional: bool = False
    # Reads say the generation they read, without compare-and-swap (Icechunk read-only).
    reads_generations: bool = False
    # A source never written through (a mount of it is read-only).
    read_only: bool = False
    # Writes are made durable by a commit (`Driver.sync`), not when they return (Icechunk).
    commits: bool = False
    # Objects one request deletes (`Driver.delete_paths`; 0: one request each).
    bulk_deletes: int = 0
    # It has versions to show below `.versions/` (its facet, `Driver.versions`: Icechunk).
    versions: bool = False
    # It knows the generation of each key without a request, from what it follows (an
    # Icechunk snapshot: `facets.VersionHistory.known_generation`), and can take up from the generations
    # an earlier mount read (`facets.VersionHistory.resume`).
    knows_generations: bool = False

    @property
    def versioned(self) -> bool:
        """Whether reads report the generation of what they read."""
        return self.conditional or self.reads_generations

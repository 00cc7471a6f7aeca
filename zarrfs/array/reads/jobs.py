"""A stream's region cut into jobs for the loader threads or the decoding processes: a job's
worth of read chunks each, the inner chunks of one shard together."""

from __future__ import annotations

from collections.abc import Callable

from ...grid import Index, Piece

SHARD_JOB_BYTES = 4 << 20  # of inner chunks of one shard (read together where they can be)
# On S3, the chunks of a job are fetched together: a GET waited for on the event loop costs
# a loader ~0.3 ms of Python besides the request (fsspec's sync, the thread hops); four at a
# time, ~0.1 ms each. Measured, 512 GETs of 512 KiB chunks from 32 threads: 0.52 s of CPU
# one at a time, 0.39 s four at a time. At most S3_JOB_CHUNKS in flight a job.
S3_JOB_BYTES = 2 << 20
S3_JOB_CHUNKS = 16


def plan_jobs(pieces: list[Piece], chunk_nbytes: int, stored_in: Callable[[Index], Index], *,
              sharded: bool, batched_gets: bool, job_bytes: int) -> list[list[Piece]]:
    """The pieces, a job's worth at a time (`job_bytes`, the lane's: policy.JOB_BYTES): small
    chunks several to a job (a job costs more than decoding a 4 KiB chunk), fewer where a
    job's chunks are fetched at once (`batched_gets`); the inner chunks of one shard
    (`stored_in`) together, so that those lying next to each other are read with one request."""
    chunk_bytes = max(1, chunk_nbytes)
    if not sharded:
        per_job = max(1, job_bytes // chunk_bytes)
        if batched_gets:
            per_job = min(S3_JOB_CHUNKS, max(1, S3_JOB_BYTES // chunk_bytes))
        return [pieces[i : i + per_job] for i in range(0, len(pieces), per_job)]
    per_job = max(1, SHARD_JOB_BYTES // chunk_bytes)
    return [run[i : i + per_job] for run in by_stored_object(pieces, stored_in)
            for i in range(0, len(run), per_job)]


def by_stored_object(pieces: list[Piece], stored_in: Callable[[Index], Index]) -> list[list[Piece]]:
    """Pieces grouped by the chunk or shard they are stored in (in the order first met)."""
    found: dict[Index, list[Piece]] = {}
    for piece in pieces:
        found.setdefault(stored_in(piece.cell), []).append(piece)
    return list(found.values())

"""A decoding process's encoding jobs (issue 87): a written chunk's elements, which the daemon
copied into a staging buffer of shared memory (zarrfs.array.decoding.staging), encoded with the
array's own encoder on the worker's interpreter lock, and the encoding written over them in
the same buffer, where the daemon's store write takes it from.

The worker reads the elements where they lie (no copy) and copies the encoding once (the
encoders return new bytes); an encoding larger than the buffer, or an encoder that fails, is
answered as such, and the daemon encodes the chunk itself."""

from __future__ import annotations

import math
import mmap
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...codecs import BytesLike

Encoder = Callable[[np.ndarray], BytesLike]  # an array's encoder: a chunk's elements to their encoding


def encode(job: int, body: tuple[Any, ...], encoders: dict[bytes, Encoder],
           slabs: dict[int, mmap.mmap]) -> tuple[Any, ...]:
    """The chunk `body` names encoded in its staging buffer: ("done", job, (the encoding's
    size, CPU seconds)), or ("done", job, (-1, why not)) when it could not be (the encoder
    failed, or its encoding is larger than the buffer: the daemon encodes it)."""
    key, slab, shape, dtype, capacity = body
    started = time.thread_time()
    try:
        mapped = slabs[slab]
        data = np.frombuffer(mapped, dtype=dtype, count=math.prod(shape)).reshape(shape)
        out = memoryview(encoders[key](data)).cast("B")
        if out.nbytes > capacity:
            raise ValueError(f"its encoding ({out.nbytes} bytes) is larger than its buffer ({capacity})")
        if not np.shares_memory(np.frombuffer(out, np.uint8), data):  # (not the elements as they are)
            mapped[: out.nbytes] = out
    except Exception as e:  # (a bug in an encoder, or no room)
        return ("done", job, (-1, f"{type(e).__name__}: {e}"))
    return ("done", job, (out.nbytes, time.thread_time() - started))

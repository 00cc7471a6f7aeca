#!/usr/bin/env python3
"""zarrfs benchmark, random writes: fio's random 4-256 KiB writes (psync and a shared mmap)
into `data` of a fresh copy of a uint16 zstd array (plain 512x512 chunks, and 4096x4096
shards of them), each on a fresh mount, with the final fsync; beside them TensorStore writing
random byte ranges of the same sizes, as rows of the same array, each write durable.

    .venv/bin/python benchmarks/random_writes.py [--size 256M] [--runtime 8] [--repeat 3]
        [--out $TMPDIR/zarrfs-random-writes.md]

Needs fio. See benchmarks/README.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.random_writes import main

if __name__ == "__main__":
    main(__doc__)

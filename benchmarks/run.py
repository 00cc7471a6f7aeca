#!/usr/bin/env python3
"""zarrfs benchmark: reads (local and S3), writes, memory, sharding cost and groups against
TensorStore, zarr-python 3 and a plain tmpfs copy, in one run; a markdown report with the
ratio and ok/MISS against each target, and a plot (PNG) beside it.

    .venv/bin/python benchmarks/run.py [--size 256M] [--repeat 5] [--out results.md]
    .venv/bin/python benchmarks/run.py --quick            # 32 MiB, 2 repeats: smoke test
    .venv/bin/python benchmarks/run.py --profile          # + py-spy profile of a cold read
    .venv/bin/python benchmarks/run.py --only-group       # mount + ls of 10,000 small arrays

The arrays are built by TensorStore in a temporary directory on the local disk; the same
values as raw little-endian C-order files go to /dev/shm. Every reader starts with the
compressed files in the page cache (they are read once before each measurement); the page
cache of the *mount* is dropped between cold runs by mounting afresh. Figures are medians of
--repeat runs; MB/s are 10^6 bytes per second of uncompressed array data.

See benchmarks/README.md for what each figure means; the code is in benchmarks/zarrfs_bench/.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.cli import main

if __name__ == "__main__":
    main(__doc__)

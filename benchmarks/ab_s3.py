#!/usr/bin/env python3
"""A/B of two zarrfs trees on the latency benchmark's arrays: cold `dd` of `data` over S3 (moto
behind the delaying proxy) and from the local disk, fresh mounts, the variants alternating
run by run; MB/s, the daemon's CPU seconds during the dd and its peak RSS (medians), with
TensorStore's s3 kvstore read alongside.

    .venv/bin/python benchmarks/ab_s3.py old=/work/main new=/tmp/wt-c [--pairs 5]
        [--delay 0.01] [--layouts sharded,plain] [--local] [--size 256M] [--cache 256M]

Each variant's daemon runs with PYTHONPATH=<tree> (so `zarrfs` of the shared virtualenv runs
that tree's code).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.ab import main

if __name__ == "__main__":
    main(__doc__)

#!/usr/bin/env python3
"""zarrfs benchmark, latency section: cold whole-array reads from a local moto S3 server
behind a delaying proxy, plain and sharded, zarrfs against TensorStore and zarr-python, with
the requests each sends, and zarrfs on Azurite (Azure) behind the same proxy; a markdown
report and a plot (PNG) beside it.

    .venv/bin/python benchmarks/latency.py [--size 256M] [--repeat 3] [--delays 0,0.01]
        [--no-azure] [--out benchmarks/latency.md]       # + benchmarks/latency.png

--delays are seconds per direction (0.01: a 20 ms round trip). See benchmarks/README.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.latency_cli import main

if __name__ == "__main__":
    main(__doc__)

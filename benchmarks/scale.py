#!/usr/bin/env python3
"""zarrfs benchmark, scale: what each access costs against the array's chunk count (twins of
10^3 to 10^6 chunks, locally and on S3 behind a latency proxy), in seconds and store requests,
TensorStore reading the same elements beside.

    .venv/bin/python benchmarks/scale.py [--chunks 1000 10000 100000 1000000] [--repeat 3]
        [--s3-chunks 100000] [--delay-ms 20] [--data-dir DIR] [--skip-canvas] [--out FILE]

See benchmarks/README.md and benchmarks/zarrfs_bench/scale.py.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.common import log
from zarrfs_bench.scale import run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--s3-chunks", type=int, default=100_000, help="0: no S3 twin")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="per request, on S3")
    parser.add_argument("--mount-opts", default="")
    parser.add_argument("--skip-canvas", action="store_true", help="no sparse canvas section")
    parser.add_argument("--data-dir", type=Path, help="where twins are kept between runs")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = run(args)
    log(text)
    if args.out:
        args.out.write_text(text)

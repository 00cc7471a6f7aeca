#!/usr/bin/env python3
"""zarrfs benchmark, clusters: N mounts of one S3 array (N `zarrfs mount` daemons, as N nodes)
writing disjoint elements of the same two shards at once, round after round (pwrite, a barrier,
fsync), as tests/reliability/test_cluster.py does; the fsync latency under that contention
(p50, p90, max), the write conflicts the mounts counted, and a check with zarr-python that
every acknowledged write is in the store. Against a moto S3 server on 127.0.0.1 (a child
process).

    .venv/bin/python benchmarks/cluster.py [--nodes 1,4,8] [--rounds 8] [--repeat 2]
        [--out $TMPDIR/zarrfs-cluster.md]

See benchmarks/README.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.cluster import main

if __name__ == "__main__":
    main(__doc__)

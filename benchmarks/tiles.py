#!/usr/bin/env python3
"""zarrfs benchmark, tiles: random 512x512 tiles of a large image read through `data.tif`
(tifffile's zarr interface, GDAL windows) on fresh mounts, against the same readers on a local
copy of the file, TensorStore reading the same tiles, and `np.memmap` of `data`; plain and
sharded, local and on S3, with the chunks the daemon decoded and the bytes it fetched.

    .venv/bin/python benchmarks/tiles.py [--size 256M] [--tiles 24] [--repeat 5] [--skip-s3] [--skip-memmap]
        [--readers tifffile,gdal] [--layouts plain,sharded]
        [--out benchmarks/tiles.md]

See benchmarks/README.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from zarrfs_bench.tiles import main

if __name__ == "__main__":
    main(__doc__)

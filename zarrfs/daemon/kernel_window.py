"""The kernel's readahead window a mount gets (`-o readahead=KB`, or chosen here): what a
mount of one array can afford, from its chunks and what a request costs on its store
(zarrfs.array.reads.readahead_cost); a group, whose arrays are opened as they are met, keeps the
kernel's usual 1 MiB."""

from __future__ import annotations

import logging

from ..array import FREE_REQUESTS, KERNEL_MAX_KB, LOCAL_FREE_REQUESTS, kernel_window_kb
from ..errors import ZarrfsError
from ..options import MountOptions
from ..tree import ARRAY, Tree

log = logging.getLogger(__name__)


def window_kb(options: MountOptions, tree: Tree) -> int:
    """The window asked for, or the one the mounted array's chunks afford."""
    if options.readahead_kb is not None:
        return options.readahead_kb
    if tree.root.role != ARRAY:
        return KERNEL_MAX_KB
    try:
        directory = tree.open_array("").directory
    except (ZarrfsError, OSError) as e:  # (its first read says what is wrong)
        log.debug("the kernel's readahead stays at %d KiB: %s", KERNEL_MAX_KB, e)
        return KERNEL_MAX_KB
    if directory is None:
        return KERNEL_MAX_KB
    array = directory.array
    # A shard is the unit a read pays for: the ranges of its inner chunks that one read wants
    # are merged into one request (and a sequential reader's shards are fetched whole).
    free = FREE_REQUESTS if array.fetches_remotely else LOCAL_FREE_REQUESTS
    chosen = kernel_window_kb(tuple(array.shape), tuple(array.chunk_shape),
                              array.data_type.storage.itemsize, free)
    log.info("the kernel reads ahead %d KiB at most (what the array's chunks afford)", chosen)
    return chosen

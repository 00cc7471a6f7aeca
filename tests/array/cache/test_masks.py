"""Written-masks (zarrfs.array.cache.masks): a flag per row while writes cover whole rows, a flag per
element after any other write, and always the same elements as a mask kept per element."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zarrfs.array.cache import masks

pytestmark = pytest.mark.fast

CHUNK = (8, 6, 4)


def _rows(first: int, last: int) -> tuple[slice, ...]:
    return (slice(first, last), slice(0, CHUNK[1]), slice(0, CHUNK[2]))


def test_whole_rows_keep_a_flag_per_row() -> None:
    mask, fresh = masks.mark(None, _rows(2, 5), CHUNK)
    assert mask.shape == (8, 1, 1)
    assert fresh == 3 * 6 * 4
    mask, fresh = masks.mark(mask, _rows(4, 7), CHUNK)
    assert mask.shape == (8, 1, 1)
    assert fresh == 2 * 6 * 4, "a row written twice was counted twice"
    assert np.broadcast_to(mask, CHUNK)[2:7].all() and not np.broadcast_to(mask, CHUNK)[[0, 1, 7]].any()


def test_a_partial_row_widens_the_mask_to_elements() -> None:
    mask, _ = masks.mark(None, _rows(0, 2), CHUNK)
    mask, fresh = masks.mark(mask, (slice(1, 3), slice(0, 3), slice(0, 4)), CHUNK)
    assert mask.shape == CHUNK
    assert fresh == 1 * 3 * 4  # row 1 was written whole already
    assert mask[:2].all() and mask[2, :3].all() and not mask[2, 3:].any() and not mask[3:].any()


@pytest.mark.parametrize("shape", [(), (5,), (4, 3), (8, 6, 4)])
def test_any_writes_set_the_same_elements_as_a_mask_per_element(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    for _ in range(50):
        mask: np.ndarray | None = None
        reference = np.zeros(shape, dtype=bool)
        for _ in range(int(rng.integers(1, 6))):
            in_cell: list[slice] = []
            for n in shape:
                whole = rng.random() < 0.6
                lo = 0 if whole else int(rng.integers(0, n))
                hi = n if whole else int(rng.integers(lo + 1, n + 1))
                in_cell.append(slice(lo, hi))
            selection: tuple[Any, ...] = (*in_cell, Ellipsis)
            expected_fresh = int(np.count_nonzero(~reference[selection]))
            mask, fresh = masks.mark(mask, in_cell, shape)
            reference[selection] = True
            assert fresh == expected_fresh
            assert np.array_equal(np.broadcast_to(mask, shape), reference)

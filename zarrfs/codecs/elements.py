"""A chunk's elements between processes and byte orders: the types of other packages
(ml_dtypes' bfloat16, float8s...) keep their byte order only as their native form and their
order, and numpy copies them from one byte order to the other unswapped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True)
class SentType:
    """A type of another package (ml_dtypes' bfloat16, float8s...) as it goes to another
    process: pickled whole, it arrives in the machine's byte order whatever its own (numpy's
    own types keep theirs), so it goes as its native form and its order (`sent`, `received`)."""

    native: np.dtype[Any]
    order: Literal["<", ">", "=", "|"]


def sent(dtype: np.dtype[Any]) -> np.dtype[Any] | SentType:
    return SentType(dtype.newbyteorder("="), dtype.byteorder) if dtype.isbuiltin == 2 else dtype


def received(dtype: np.dtype[Any] | SentType) -> np.dtype[Any]:
    return dtype.native.newbyteorder(dtype.order) if isinstance(dtype, SentType) else dtype


def place(target: np.ndarray, values: np.ndarray) -> None:
    """`values` copied into `target` (a view of the same shape) as `target`'s type, swapped
    where their byte orders differ: numpy copies the types of other packages (ml_dtypes'
    bfloat16, float8s...) from one byte order to the other unswapped; `astype` swaps them."""
    foreign = values.dtype.isbuiltin == 2 or target.dtype.isbuiltin == 2
    target[...] = values.astype(target.dtype) if foreign and values.dtype != target.dtype else values

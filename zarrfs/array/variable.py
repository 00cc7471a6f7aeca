"""Reading arrays of strings or bytes (no fixed element size, so no flat view and no cache
entries): regions as object arrays, decoded chunk by chunk from the store. Read only; what
reads them (the text view, data.h5) keeps what it needs. The stored chunks read are kept
within `FETCHED`'s budget: the first `stat` of `data.txt` and of `data.h5` (`ls -l` makes
both) each read every chunk, the second from here."""

from __future__ import annotations

import logging

import numpy as np

from ..codecs import CodecError
from ..codecs.vlen import VlenDecoder
from ..errors import ChunkError
from ..formats.description import VariableDescription
from ..grid import Box, Index
from ..store import Store
from .cache import HeldBytes

log = logging.getLogger(__name__)
FETCHED = HeldBytes(32 << 20)  # (stored chunks of every array of strings, by recency)


class VariableArray:
    def __init__(self, store: Store, description: VariableDescription) -> None:
        self.store = store
        self.description = description
        self.grid = description.grid
        self.decoder = VlenDecoder(description.codecs, self.grid.chunk_shape)
        self._fetched = object()  # (this array's in FETCHED: the same until it is opened again)

    @property
    def shape(self) -> Index:
        return self.grid.shape

    def read(self, box: Box) -> np.ndarray:
        """The elements of `box` (inside the array), an object array of str or bytes."""
        out = np.empty(box.shape, dtype=object)
        for piece in self.grid.cells_of(box):
            out[piece.in_box] = self._chunk(piece.cell)[piece.in_cell]
        return out

    def _chunk(self, index: Index) -> np.ndarray:
        key = self.grid.chunk_key_encoding.key(index)
        shape = self.grid.chunk_box(index).shape
        stored = FETCHED.get((self._fetched, key))
        if stored is None:
            found = self.store.read(key)
            if found is None:
                out = np.empty(shape, dtype=object)
                out[...] = self.description.fill
                return out
            stored = found.data
            FETCHED.put((self._fetched, key), stored)
        try:
            return self.decoder.decode(stored, shape, self.description.order)
        except CodecError as e:
            log.error("corrupt chunk %r: %s", self.store.path(key), e)
            raise ChunkError(key, str(e)) from None

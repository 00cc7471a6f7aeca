"""Region reads and writes over the chunk grid, in rooms each entered through its face (its
`__init__`): the mount-wide chunk cache (`cache`), chunks moved between the store and memory
(`stored`), reads and streams (`reads`), write-back and resizes (`writes`). At the top: the
array (`core`, a facade over them), its grid (`geometry`), what a mount's arrays share
(`shared`, `loader_pool`), rechecks (`recheck`), arrays of variable-size strings (`variable`)."""

from .cache import DEFAULT_CACHE_BYTES
from .core import ZarrArray
from .shared import Shared

__all__ = ["DEFAULT_CACHE_BYTES", "Shared", "ZarrArray"]

"""The text view (`data.txt`) of an array that has no flat view because its elements are
strings or bytes of no fixed size."""

from __future__ import annotations

import logging

from ..array_metadata import variable_array_of
from ..errors import ZarrfsError
from ..formats import NodeMetadata
from ..formats.variable import NotVariableError
from ..store import Store
from ..views.text import TextFile

log = logging.getLogger(__name__)


def text_view(store: Store, node: NodeMetadata, problem: str) -> tuple[TextFile | None, str]:
    """The text view of the array `node` (None: it has none) and why it has no flat view
    (`problem`, what opening it said, or why its strings cannot be read)."""
    try:
        text = TextFile(variable_array_of(store, node))
        log.info("array %s of strings or bytes is shown as data.txt", node.path or "/")
        return text, problem
    except NotVariableError:
        return None, problem
    except ZarrfsError as e:
        return None, f"its strings cannot be read: {e}"

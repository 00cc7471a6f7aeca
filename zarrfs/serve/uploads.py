"""A PUT of a file of the tree, as trusted servers take one: its body staged (`staging`) and
written only once all of it came; then, under its array's write lock (one for `data`,
`data.npy`, the header views and the chunk files of one array: the same bytes), its
preconditions (`If-Match`, `If-Unmodified-Since`, ...) are checked against the file's
validators as they are then (not those seen when the request came), the body written through
the view and stored (`flush`): of two PUTs with one `If-Match`, exactly one is written, the
other is 412. A whole PUT of `data` of a new length changes its first dimension, then only.

A whole PUT of 0 bytes to a file that holds bytes changes nothing (Finder and Windows send
one before the file's bytes; an array's rows are emptied through a mount's `truncate`).
"""

from __future__ import annotations

from typing import IO, Any, Protocol

from wsgidav import util
from wsgidav.dav_error import DAVError

from ..tree import UPLOAD, Ref
from ..views import FileView
from .locking import check_unlocked
from .site import Site
from .staging import StagedBody, expected_length
from .statuses import HTTP_FORBIDDEN

COPY_BLOCK = 4 << 20  # bytes of a staged body written through the view at a time
CONDITIONS = ("HTTP_IF_MATCH", "HTTP_IF_UNMODIFIED_SINCE", "HTTP_IF_NONE_MATCH")


class PutTarget(Protocol):
    """The file resource a PUT writes (`resources.File`)."""

    site: Site
    ref: Ref
    path: str
    environ: dict[str, Any]

    @property
    def view(self) -> FileView: ...

    def fresh_validators(self) -> tuple[str, float]: ...


class Put:
    """One PUT of `file`: `body` takes the request's body; its `close` writes it. `ranged`:
    the (first, last) bytes of a partial PUT (Content-Range), None: a whole one."""

    def __init__(self, file: PutTarget, ranged: tuple[int, int] | None) -> None:
        site, ref = file.site, file.ref
        if not site.writable(ref) or not file.view.writable:
            raise DAVError(HTTP_FORBIDDEN, context_info=f"{file.path} is not writable")
        self._file = file
        self._resource: Any = file  # (as a DAV resource: its locks, its conditions)
        check_unlocked(self._resource, ref)  # (at once: a PUT that cannot be written is not read)
        self._range = ranged
        expected = expected_length(file.environ) if ranged is None else ranged[1] + 1 - ranged[0]
        self.body = StagedBody(site.staging, expected, self._apply)

    def _apply(self, staged: IO[bytes], size: int) -> None:
        file, view = self._file, self._file.view
        with file.site.writing(file.ref):
            check_unlocked(self._resource, file.ref)  # (a LOCK taken while the body came)
            self._check_conditions()
            if self._range is None and size == 0 and view.size and file.ref.role != UPLOAD:
                return  # (kept: a client's empty PUT before the file's bytes)
            if self._range is None and size != view.size and file.ref.role != UPLOAD:
                view.resize(size)  # (`data`: its first dimension, as truncate(2))
            offset = 0 if self._range is None else self._range[0]
            while block := staged.read(COPY_BLOCK):
                offset += _write(view, offset, block)
            view.flush()  # (stored, or the PUT fails: its answer waits for this)

    def _check_conditions(self) -> None:
        environ = self._file.environ
        if not any(name in environ for name in CONDITIONS):
            return
        etag, modified = self._file.fresh_validators()
        util.evaluate_http_conditionals(self._resource, int(modified), etag, environ)


def _write(view: FileView, offset: int, block: bytes) -> int:
    left = memoryview(block)
    while left:
        written = view.write(offset + len(block) - len(left), left)
        left = left[written:]
    return len(block)

"""The tree as WsgiDAV resources: a directory of the tree is a collection, a file a
non-collection, at the same paths below the server's root as below a mountpoint.

What a mount allows, these allow: a PUT writes a writable file (`data`, `data.npy`, the
writable headers, a chunk file) through the same write-back and compare-and-swap, and answers
once its bytes are stored; a PUT of a new `NAME.npy` into a group makes the array NAME; MKCOL
makes a group; DELETE and MOVE delete and move a whole group or array. What a mount refuses
(a file alone deleted, a copy, a file of another kind) is refused with its status
(`statuses`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable
from typing import Any

from wsgidav.dav_error import DAVError
from wsgidav.dav_provider import DAVCollection, DAVNonCollection, DAVProvider
from wsgidav.util import get_uri_name, get_uri_parent

from ..errors import EditRefused, ZarrfsError
from ..tree import ARRAY, GROUP, UPLOAD, Ref
from ..views import FileView
from .listing_page import directory_page
from .locking import check_unlocked, release_locks
from .propfind import propfind
from .ranges import several_ranges
from .reading import READS, Reads
from .reserved import Reserved
from .side_files import SideFile, is_side_file, side_files_in
from .site import Site, content_type
from .staging import StagedBody
from .statuses import HTTP_FORBIDDEN, answering
from .streams import STREAMED_BYTES, FileReader
from .uploads import Put

OPENING = ("GET", "HEAD", "PUT")  # (what a mount's open(2) is: close-to-open checks the store)
CONTENT_RANGE = "zarrfs.content_range"  # (start, end): a partial PUT's bytes (`guard`)
OPENED = "zarrfs.opened"  # the URL paths a request opened (WsgiDAV looks a path up more than once)


class TreeProvider(DAVProvider):  # type: ignore[misc]
    def __init__(self, site: Site) -> None:
        super().__init__()
        self.site = site

    def is_readonly(self) -> bool:
        return self.site.read_only

    def get_resource_inst(self, path: str,
                          environ: dict[str, Any]) -> Directory | File | SideFile | Reserved | None:
        self._count_get_resource_inst += 1
        if is_side_file(get_uri_name(path)):
            path = path.rstrip("/")
            kept = self.site.side_files.get(path) is not None
            return SideFile(path, environ, self.site.side_files, self.site.read_only) if kept else None
        with answering(f"looking up {path}"):
            ref = self.site.resolve(path)
            if ref is None:
                return self.site.reservations.found(path, environ, self.lock_manager)
            if ref.is_dir:
                return Directory(path, environ, self.site, ref)
            if environ.get("REQUEST_METHOD") in OPENING and path not in environ.setdefault(OPENED, set()):
                self._open(path, ref, environ)
            return File(path, environ, self.site, ref, self.site.file(ref))

    def _open(self, path: str, ref: Ref, environ: dict[str, Any]) -> None:
        """A GET, HEAD or PUT: an open of the file (close-to-open), unless it continues its
        connection's reading of the file (`reading`)."""
        environ[OPENED].add(path)
        reads: Reads | None = environ.get(READS)
        continued = reads is not None and reads.continues(path, environ, self.site.options.recheck)
        if not continued:
            self.site.fresh(ref)
        if reads is not None and environ["REQUEST_METHOD"] != "PUT":
            reads.reading(path, checked=not continued)

    def allowed(self, path: str) -> list[str]:
        """The methods the resource at `path` takes (a 405's Allow header, RFC 9110, 15.5.6)."""
        reading = ["OPTIONS", "GET", "HEAD", "PROPFIND"]
        if self.site.read_only:
            return reading
        try:
            ref = self.site.resolve(path)
        except (ZarrfsError, OSError):
            return reading
        if ref is None:
            return ["OPTIONS", "PUT", "MKCOL"]  # (a new .npy, a new group)
        if not self.site.writable(ref):
            return reading
        changing = ["DELETE", "MOVE"] if ref.role in (GROUP, ARRAY) else [] if ref.is_dir else ["PUT"]
        return [*reading, "PROPPATCH", *changing, "LOCK", "UNLOCK"]

    def custom_request_handler(self, environ: dict[str, Any], start_response: Callable[..., Any],
                               default_handler: Callable[..., Any]) -> Any:
        """PROPFIND (`propfind`), a directory's page (`listing_page`) and several ranges of a
        file (`ranges`) are answered here; the rest, and a single range, by WsgiDAV."""
        method = environ["REQUEST_METHOD"]
        if method == "PROPFIND":
            return propfind(self, environ, start_response)
        if method in ("GET", "HEAD"):
            resource = self.get_resource_inst(environ["PATH_INFO"], environ)
            if isinstance(resource, Directory):
                return directory_page(resource.members(), environ, start_response)
            if isinstance(resource, File) and "," in environ.get("HTTP_RANGE", ""):
                return several_ranges(resource, environ, start_response, default_handler)
        return default_handler(environ, start_response)


class Directory(DAVCollection):  # type: ignore[misc]
    def __init__(self, path: str, environ: dict[str, Any], site: Site, ref: Ref) -> None:
        super().__init__(path, environ)
        self.site = site
        self.ref = ref

    def get_display_name(self) -> str:
        return str(get_uri_name(self.path))

    def get_creation_date(self) -> float:
        return self.site.started

    def get_last_modified(self) -> float:
        return self.site.started

    def get_member_names(self) -> list[str]:
        with answering(f"listing {self.path}"):
            return list(self.site.names(self.ref))

    def members(self) -> Iterable[Directory | File | SideFile]:
        """The members one at a time (a streamed PROPFIND: `propfind`), Finder's files last."""
        with answering(f"listing {self.path}"):
            names = self.site.names(self.ref)
        for name, child in self.site.walk(self.ref, names):
            yield self._member(name, child)
        yield from side_files_in(self, self.site.side_files, self.site.read_only)

    def get_member(self, name: str) -> Directory | File | None:
        """A member, as a listing shows it (no close-to-open check: nothing of it is read)."""
        with answering(f"looking up {self.path}{name}"):
            child = self.site.tree.lookup(self.ref, name)
        return None if child is None else self._member(name, child)

    def _member(self, name: str, child: Ref) -> Directory | File:
        path = self.path.rstrip("/") + "/" + name
        return Directory(path, self.environ, self.site, child) if child.is_dir else \
            File(path, self.environ, self.site, child, None)

    # -- changes -----------------------------------------------------------------------------

    def create_collection(self, name: str) -> None:
        self._writable_group()
        with answering(f"MKCOL {self.path}{name}"):
            self.site.edit(self.site.tree.edits.create_group, self.ref.path, name)

    def create_empty_resource(self, name: str) -> File | SideFile | Reserved:
        """A PUT (or a LOCK) of a new file: one of Finder's (`side_files`), or `NAME.npy` in
        a group, which makes the array NAME. A LOCK of a new `NAME.npy` takes nothing of the
        tree: its lock holds the name (`reserved`) until its PUT makes the array."""
        path = self.path.rstrip("/") + "/" + name
        if is_side_file(name):
            return self._side_file(path)
        self._writable_group()
        if self.environ["REQUEST_METHOD"] == "PUT":
            return self._new_npy(name, self.environ)
        self.site.tree.abandon_upload(self._new_npy(name, self.environ).ref)  # (the name checked)
        self.site.reservations.take(path, lambda environ: self._new_npy(name, environ))
        return Reserved(path, self.environ, lambda environ: self._new_npy(name, environ))

    def _new_npy(self, name: str, environ: dict[str, Any]) -> File:
        path = self.path.rstrip("/") + "/" + name
        with answering(f"{environ['REQUEST_METHOD']} {path}"):
            ref = self.site.tree.begin_upload(self.ref.path, name)
            return File(path, environ, self.site, ref, self.site.file(ref))

    def _side_file(self, path: str) -> SideFile:
        if self.site.read_only:
            raise DAVError(HTTP_FORBIDDEN, context_info="the tree is read-only")
        found = SideFile(path, self.environ, self.site.side_files, self.site.read_only)
        if self.environ["REQUEST_METHOD"] != "PUT":
            with answering(f"LOCK {path}"):
                self.site.side_files.put(path, b"")  # (a LOCK makes it, empty, as RFC 4918 has it)
        return found

    def handle_delete(self) -> bool:
        """A group or an array, whole (a group's children too, as `rm -r` on a mount), at the
        cost of what its store holds: refused, or checked for locks below it, before anything
        is listed (WsgiDAV's own DELETE lists every descendant first: 10^6 of a grid)."""
        self._whole("deleted")
        check_unlocked(self, self.ref)
        with answering(f"DELETE {self.path}"):
            self.site.edit(self.site.tree.edits.delete, self.ref.path, True)
        self.site.side_files.moved(self.path, None)
        self.remove_all_locks(recursive=True)
        return True

    def support_recursive_move(self, dest_path: str) -> bool:
        return True

    def handle_move(self, dest_path: str) -> bool:
        """A group or an array moved whole, into a group (as `mv` on a mount)."""
        self._whole("moved")  # (WsgiDAV checked the locks below it: in its lock manager)
        with answering(f"MOVE {self.path}"):
            parent = self.site.resolve(get_uri_parent(dest_path))
            if parent is None or parent.role != GROUP:
                raise EditRefused(errno.ENOENT, f"{dest_path}: not in a group")
            self.site.edit(self.site.tree.edits.move, self.ref.path, parent.path, get_uri_name(dest_path))
        self.site.side_files.moved(self.path, dest_path)
        self.remove_all_locks(recursive=True)
        return True

    def handle_copy(self, dest_path: str, *, depth_infinity: bool) -> bool:
        raise DAVError(HTTP_FORBIDDEN, context_info="copies are not made (copy the files they show)")

    def _whole(self, done: str) -> None:
        if self.ref.role not in (GROUP, ARRAY) or not self.site.writable(self.ref):
            raise DAVError(HTTP_FORBIDDEN, context_info=f"only a group or an array is {done}, whole")

    def _writable_group(self) -> None:
        if self.ref.role != GROUP or not self.site.writable(self.ref):
            raise DAVError(HTTP_FORBIDDEN, context_info="only a group of a writable tree takes new nodes")


class File(DAVNonCollection):  # type: ignore[misc]
    def __init__(self, path: str, environ: dict[str, Any], site: Site, ref: Ref,
                 view: FileView | None) -> None:
        super().__init__(path, environ)
        self.site = site
        self.ref = ref
        self._view = view
        self._put: Put | None = None
        self._validators: tuple[str, float] | None = None  # (ETag, Last-Modified): once a request

    @property
    def view(self) -> FileView:
        if self._view is None:
            with answering(f"opening {self.path}"):
                self._view = self.site.file(self.ref)
        return self._view

    def get_display_name(self) -> str:
        return str(get_uri_name(self.path))

    def get_content_length(self) -> int:
        return self.view.size

    def get_content_type(self) -> str:
        return content_type(self.name)

    def get_creation_date(self) -> float:
        return self.site.started

    def get_last_modified(self) -> float:
        return self.validators()[1]

    def get_etag(self) -> str:
        return self.validators()[0]

    def fresh_validators(self) -> tuple[str, float]:
        """The validators as they are now (a PUT's preconditions, under its write lock)."""
        self._validators = None
        return self.validators()

    def validators(self) -> tuple[str, float]:
        if self._validators is None:
            with answering(f"{self.path}'s version"):
                self._validators = self.site.validators.of(self.ref, self.view)
        return self._validators

    def support_etag(self) -> bool:
        return True

    def support_ranges(self) -> bool:
        return True

    def get_content(self) -> Answered:
        return Answered(FileReader(self.view, streamed=self._streamed()), f"GET {self.path}")

    def _streamed(self) -> bool:
        """Whether the GET reads enough of the file to stream it (else a range, as a pread)."""
        asked = self.environ.get("HTTP_RANGE", "").removeprefix("bytes=").split(",")[0].strip()
        start, _, end = asked.partition("-")
        if not asked or not start.isdigit():
            return not asked  # (no range: the whole file; a suffix range: its tail, as asked)
        return not end.isdigit() or int(end) + 1 - int(start) > STREAMED_BYTES

    # -- a PUT ---------------------------------------------------------------------------------

    def begin_write(self, *, content_type: str | None = None) -> Answered:
        """A PUT: its body staged, written once whole (`uploads`)."""
        with answering(f"PUT {self.path}"):
            try:
                self._put = Put(self, self.environ.get(CONTENT_RANGE))
            except BaseException:
                self._ended(stored=False)
                raise
        return Answered(self._put.body, f"PUT {self.path}")

    def end_write(self, *, with_errors: bool) -> None:
        put, self._put = self._put, None
        if put is not None:
            put.body.discard()
            self._ended(stored=not with_errors)

    def _ended(self, *, stored: bool) -> None:
        """A new `NAME.npy` whose PUT failed frees its name, and its locks end with it."""
        self._validators = None  # (the PUT's answer carries the ETag of what it stored)
        try:
            if self.ref.role == UPLOAD:
                with answering(f"PUT {self.path}"):
                    if stored:
                        self.site.tree.upload_closed(self.ref)
                    else:
                        self.site.tree.abandon_upload(self.ref)
                        release_locks(self)
        finally:
            self.site.forget_stale()

    def delete(self) -> None:
        raise DAVError(HTTP_FORBIDDEN, context_info="a file is deleted with its group or array")

    def handle_delete(self) -> bool:
        self.delete()
        return True

    def handle_move(self, dest_path: str) -> bool:
        raise DAVError(HTTP_FORBIDDEN, context_info="a file moves with its group or array")

    def handle_copy(self, dest_path: str, *, depth_infinity: bool) -> bool:
        raise DAVError(HTTP_FORBIDDEN, context_info="copies are not made (GET the file, PUT it)")


class Answered:
    """A GET's reader or a PUT's writer whose failures are the statuses they mean
    (`statuses`), logged, never a 500 (mid-stream, the connection is closed)."""

    def __init__(self, stream: FileReader | StagedBody, what: str) -> None:
        self._stream = stream
        self._what = what

    def seek(self, offset: int) -> None:
        assert isinstance(self._stream, FileReader)
        self._stream.seek(offset)

    def read(self, size: int = -1) -> bytes:
        assert isinstance(self._stream, FileReader)
        with answering(self._what):
            return self._stream.read(size)

    def write(self, data: bytes) -> int:
        assert isinstance(self._stream, StagedBody)
        with answering(self._what):
            return self._stream.write(data)

    def writelines(self, pieces: Iterable[bytes]) -> None:
        """The body's pieces, as they are read (a client cut off is its PUT's failure)."""
        assert isinstance(self._stream, StagedBody)
        with answering(self._what):
            self._stream.writelines(pieces)

    def close(self) -> None:
        with answering(self._what):
            self._stream.close()

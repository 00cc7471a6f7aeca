"""Arrays made by writing `.npy` files into a group: `cp x.npy MNT/g/`, `np.save(MNT/g/x.npy)`.

`MNT/g/NAME.npy`, created, is an `Upload`: its first bytes are buffered until they hold the
.npy header (its length is in the first 10 or 12 bytes); then the array NAME is created with
the header's shape and type (`create`), and every later byte goes straight into the array,
through a `data` file laid out as the stream is (C or Fortran order, either byte order). A
header that is not one, or a type the format cannot hold, fails the write with EINVAL before
anything is stored; a write past what the header describes is EFBIG. The file is listed while
it is open; once its last opener closes it, only the array is listed (the file is still found
by its name for `CLOSED_SECONDS`, for tools that set its mode or times after closing it).
"""

from __future__ import annotations

import errno
import itertools
import threading
import time
from collections.abc import Callable

from ..errors import EditRefused, ResizeError
from ..views import FileTooLargeError, RegionArray, RegionFile
from ..views.files import STREAM_BLOCK
from ..views.order import FortranOrder
from ..views.registry import BadNpyHeader, NpyHeader, npy_header_length, parse_npy_header

UPLOADS = itertools.count()  # (numbers the uploads: a version is never another upload's)
CLOSED_SECONDS = 30.0  # how long a closed NAME.npy is still found by its name
Create = Callable[[NpyHeader], RegionArray]  # the header -> the new array (stored, opened)


class Upload:
    """The file `NAME.npy` being written (a FileView)."""

    direct_io = True
    block_size = STREAM_BLOCK
    resizable = True
    writable = True

    def __init__(self, create: Create) -> None:
        self.version = (next(UPLOADS), 0)  # (this upload, the writes it took: its ETag's)
        self._create = create
        self._lock = threading.Lock()
        self._head = bytearray()
        self._header: NpyHeader | None = None
        self._header_bytes = b""
        self._data: RegionFile | None = None
        self._failed: str | None = None

    @property
    def size(self) -> int:
        if self._header is None:
            return len(self._head)
        return self._header.length + self._header.data_bytes

    def write(self, offset: int, data: bytes | memoryview) -> int:
        view = memoryview(data).cast("B")
        self.version = (self.version[0], self.version[1] + 1)
        target = self._target(offset, view)
        if target is None:
            return len(view)  # (all of it went into the header)
        header = self._header_bytes
        overlap = view[: max(0, len(header) - offset)]
        if bytes(overlap) != header[offset : offset + len(overlap)]:
            raise EditRefused(errno.EINVAL, "the .npy header cannot change once written")
        body = view[len(overlap) :]
        start = offset + len(overlap) - len(header)
        if start + len(body) > target.size:
            raise FileTooLargeError(f"write past the {target.size} bytes the .npy header describes")
        if body:
            target.write(start, body)
        return len(view)

    def _target(self, offset: int, view: memoryview) -> RegionFile | None:
        """Where bytes go once the header is known; before, they are buffered, and the array
        is made when the header is complete (its data bytes then written into it)."""
        with self._lock:
            if self._failed is not None:
                raise EditRefused(errno.EINVAL, self._failed)
            if self._data is not None:
                return self._data
            if offset > len(self._head):
                self._fail(f"a .npy stream must begin with its header (a hole at {offset})")
            self._head[offset : offset + len(view)] = view
            try:
                length = npy_header_length(bytes(self._head[:12]))
                if length is None or len(self._head) < length:
                    return None
                header = parse_npy_header(bytes(self._head[:length]))
            except BadNpyHeader as e:
                self._fail(f"not a .npy header: {e}")
            self._data = self._start(header)
            rest, self._head = bytes(self._head[header.length :]), bytearray()
        if len(rest) > self._data.size:
            raise FileTooLargeError(f"write past the {self._data.size} bytes the .npy header describes")
        if rest:
            self._data.write(0, rest)
        return None

    def _start(self, header: NpyHeader) -> RegionFile:
        try:
            array = self._create(header)
        except EditRefused as e:
            self._fail(str(e), e.errno)
        self._header = header
        self._header_bytes = bytes(self._head[: header.length])
        # Laid out as the stream is: Fortran order is C order over the reversed axes.
        layout = FortranOrder(array) if header.fortran_order else array
        return RegionFile(layout, None, "big" if header.dtype.byteorder == ">" else "little")

    def _fail(self, problem: str, code: int = errno.EINVAL) -> None:
        self._failed = problem
        raise EditRefused(code, problem)

    def read(self, offset: int, size: int) -> bytes | memoryview:
        with self._lock:
            data, head = self._data, bytes(self._head) if self._data is None else self._header_bytes
        if data is None or offset + size <= len(head):
            return head[offset : offset + size]
        first = head[offset : offset + size]
        rest = data.read(max(0, offset - len(head)), size - len(first))
        return first + bytes(rest)

    @property
    def made(self) -> bool:
        """Whether its array was made (its header written)."""
        with self._lock:
            return self._data is not None

    def resize(self, size: int, *, round_up: bool = False) -> None:
        """Only what changes nothing: O_TRUNC of the new file, `cp` setting the size it wrote."""
        with self._lock:
            if size == 0 and self._data is None:
                self._head.clear()
                return
        if size != self.size:
            raise ResizeError(f"a .npy stream is {self.size} bytes, as its header says")

    def flush(self) -> None:
        if self._data is not None:
            self._data.flush()

    def prefetch(self, offset: int, size: int) -> None:
        pass

    def readahead(self) -> None:
        return None


class Uploads:
    """The `.npy` files being written, by (group path, file name), with their openers."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], tuple[Upload, int]] = {}
        # Closed, not listed, still found by name for a while: `cp -p` and shutil.copy set
        # the mode of the file they wrote after closing it.
        self._closed: dict[tuple[str, str], tuple[Upload, float]] = {}

    def begin(self, group: str, name: str, create: Create, openers: int) -> Upload:
        """A new .npy file, with its openers (create: 1; mknod: 0, until it is opened)."""
        upload = Upload(create)
        with self._lock:
            if (group, name) in self._open:
                raise EditRefused(errno.EEXIST, f"{name} is being written")
            self._open[(group, name)] = (upload, openers)
        return upload

    def find(self, group: str, name: str) -> Upload | None:
        with self._lock:
            found = self._open.get((group, name))
            closed = self._closed.get((group, name))
        if found is not None:
            return found[0]
        return closed[0] if closed is not None and closed[1] > self._clock() else None

    def names(self, group: str) -> list[str]:
        with self._lock:
            return [name for (path, name) in self._open if path == group]

    def opened(self, group: str, name: str, *, writing: bool) -> None:
        """Another opener. A file closed already (still found by its name) is read as it
        was; writing it again is EEXIST: its array exists, as after CLOSED_SECONDS."""
        with self._lock:
            found = self._open.get((group, name))
            if found is not None:
                self._open[(group, name)] = (found[0], found[1] + 1)
                return
        if writing:
            raise EditRefused(errno.EEXIST, f"{name}: its array exists (made by an earlier copy)")

    def closed(self, group: str, name: str, *, released: bool = True) -> bool:
        """An opener closed it (`released` False: a close(2) of its only opener, which
        close(2) waits for, unlike the release that follows); True when it was the last
        (then the file is no longer listed)."""
        with self._lock:
            found = self._open.get((group, name))
            if found is None or (found[1] > 1 and not released):
                return False
            if found[1] > 1:
                self._open[(group, name)] = (found[0], found[1] - 1)
                return False
            del self._open[(group, name)]
            now = self._clock()
            self._closed = {k: v for k, v in self._closed.items() if v[1] > now}
            self._closed[(group, name)] = (found[0], now + CLOSED_SECONDS)
            return True

    def abandoned(self, group: str, name: str) -> bool:
        """A write of it failed (a server's refused or cut PUT): if its array was not made,
        its name is free at once (no longer found); if it was, as closed. True when it was
        open."""
        with self._lock:
            found = self._open.pop((group, name), None)
            if found is None:
                return False
            if found[0].made:
                self._closed[(group, name)] = (found[0], self._clock() + CLOSED_SECONDS)
            else:
                self._closed.pop((group, name), None)
            return True

"""The entries of a zip archive read by byte ranges, without extracting it (see `zipped`).

Opening costs the archive's size (a stat) and one read of its last `TAIL_BYTES`, which holds
the end-of-central-directory record (with ZIP64's locator and record, and any comment) and,
in an archive of up to a few thousand entries, the central directory itself; a larger
central directory is one more ranged read. Python's `zipfile` parses those records (ZIP64,
bytes prepended to the archive, name encodings: the format's corners, handled by code many
people run), given a file object (`_RangedFile`) that serves its reads from that tail and
makes a ranged read only for what lies outside it. What is kept is a compact index, name ->
`ZipMember`; the `ZipInfo` objects are dropped.

An entry is read as one ranged read covering its local header and its data (in a remote
archive, with the entries that follow it: `zip_spans`): the local
header's name and extra lengths can differ from the central directory's (writers put other
extra fields there), so a margin is fetched beyond the central directory's idea of them and
the header's own lengths decide where the data starts (a second read only when the margin
was short). Stored entries pass through (a byte range of one is a byte range of the
archive), deflated ones are inflated (raw zlib) whole; a whole entry's CRC-32 is checked.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass

from ...errors import StoreError
from .spans import RangeReader, Spans

# The end of the archive read at once: the end record, a comment of up to 64 KiB, ZIP64's
# locator and record, and the central directory of a few thousand entries.
TAIL_BYTES = 128 << 10
# Extra bytes read after a local header as the central directory describes it: a local
# header's extra fields (timestamps, ZIP64 sizes, alignment padding) are often longer.
HEADER_MARGIN = 256
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
# A deflated entry is inflated whole, in memory: no larger than this (a zip bomb's entry
# may claim any size; a stored entry is read by ranges and has no such bound).
MAX_INFLATED = 1 << 30
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # (zipfile's structFileHeader)
_LOCAL_SIGNATURE = b"PK\x03\x04"
_ENCRYPTED = 0x1


@dataclass(frozen=True, slots=True)
class ZipMember:
    """One member of the archive, as its central directory describes it."""

    header_offset: int  # where its local header starts in the archive
    compressed_size: int
    size: int  # uncompressed
    method: int
    crc: int
    header_guess: int  # the local header's length if it repeats the central directory's lengths
    encrypted: bool


class ZipIndex:
    """The entries of one archive (names without a leading "/"; directories not listed) and
    how to read them."""

    def __init__(self, name: str, size: int, entries: dict[str, ZipMember], read_range: RangeReader, *,
                 with_neighbours: bool = False) -> None:
        self.name = name
        self.size = size
        self.entries = entries
        self._read_range = read_range
        self._data_starts: dict[str, int] = {}  # (learned from local headers as they are read)
        self._spans = Spans(entries, self._extent, self._fetch) if with_neighbours else None

    @classmethod
    def open(cls, name: str, size: int, read_range: RangeReader, *,
             with_neighbours: bool = False) -> ZipIndex:
        """The index of the archive `name` of `size` bytes. StoreError when it is not a zip
        archive (or one zipfile cannot read). `with_neighbours` (a remote archive): a whole
        entry is read with the entries after it (`zip_spans`)."""
        ranged = _RangedFile(size, read_range)
        try:
            with zipfile.ZipFile(ranged) as archive:
                infos = archive.infolist()
        except (zipfile.BadZipFile, ValueError, struct.error, EOFError, NotImplementedError) as e:
            raise StoreError(name, f"not a readable zip archive: {e}") from None
        entries = {info.filename: _entry(info) for info in infos if _is_key(info.filename)}
        return cls(name, size, entries, read_range, with_neighbours=with_neighbours)

    def read(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of the entry `key` (KeyError: no such entry)."""
        entry = self.entries[key]
        if entry.encrypted:
            raise StoreError(key, f"{self.name}: encrypted zip entries are not supported")
        stop = entry.size if end is None else min(end, entry.size)
        if start >= stop:
            return b""
        if entry.method == STORED and (start, stop) != (0, entry.size):
            data_start = self._data_start(key, entry)
            return self._read_exactly(key, data_start + start, stop - start)
        return self._whole(key, entry)[start:stop]

    def _whole(self, key: str, entry: ZipMember) -> bytes:
        raw = self._raw(key, entry)
        if entry.method == STORED:
            data = raw
        elif entry.method == DEFLATED and entry.size <= MAX_INFLATED:
            data = _inflated(self.name, key, raw, entry.size)
        else:
            raise StoreError(key, f"{self.name}: zip compression method {entry.method} is not "
                                  f"supported (stored, and deflated up to {MAX_INFLATED} bytes, are)")
        if len(data) != entry.size or zlib.crc32(data) != entry.crc:
            raise StoreError(key, f"{self.name}: the entry's bytes do not match its CRC-32 or size")
        return data

    def _raw(self, key: str, entry: ZipMember) -> bytes:
        """The entry's stored bytes, in one ranged read (two when the local header is longer
        than the margin read with it)."""
        known = self._data_starts.get(key)
        if self._spans is not None:
            fetched = self._spans.read(key)
        elif known is not None:
            return self._read_exactly(key, known, entry.compressed_size)
        else:
            extent = entry.header_guess + HEADER_MARGIN + entry.compressed_size
            fetched = self._fetch(entry.header_offset, extent)
        header_length = self._header_length(key, entry, fetched)
        raw = fetched[header_length : header_length + entry.compressed_size]
        if len(raw) < entry.compressed_size:
            raw += self._read_exactly(key, entry.header_offset + header_length + len(raw),
                                      entry.compressed_size - len(raw))
        return raw

    def _extent(self, key: str) -> tuple[int, int]:
        """Where the entry's local header starts, and how much to read for it and its data."""
        entry = self.entries[key]
        return entry.header_offset, entry.header_guess + HEADER_MARGIN + entry.compressed_size

    def _data_start(self, key: str, entry: ZipMember) -> int:
        known = self._data_starts.get(key)
        if known is None:
            fetched = self._fetch(entry.header_offset, entry.header_guess + HEADER_MARGIN)
            known = entry.header_offset + self._header_length(key, entry, fetched)
        return known

    def _header_length(self, key: str, entry: ZipMember, fetched: bytes) -> int:
        """The length of the local header at the start of `fetched` (remembered)."""
        if len(fetched) < _LOCAL_HEADER.size or fetched[:4] != _LOCAL_SIGNATURE:
            raise StoreError(key, f"{self.name}: no local file header at offset {entry.header_offset}")
        fields = _LOCAL_HEADER.unpack_from(fetched)
        length = _LOCAL_HEADER.size + int(fields[-2]) + int(fields[-1])
        self._data_starts[key] = entry.header_offset + length
        return length

    def _fetch(self, start: int, length: int) -> bytes:
        """Bytes of the archive, never asked for past its end (an entry's sizes are someone
        else's numbers: a claimed 4 GiB must not become a 4 GiB buffer)."""
        length = min(length, self.size - start)
        return self._read_range(start, length) if length > 0 else b""

    def _read_exactly(self, key: str, start: int, length: int) -> bytes:
        data = self._fetch(start, length)
        if len(data) != length:
            raise StoreError(key, f"{self.name}: the archive ends inside this entry (truncated?)")
        return data


def _is_key(name: str) -> bool:
    """Whether an entry's name can be a store key: not a directory entry ("a/"), no empty,
    "." or ".." part (someone else's archive: such a name would make odd or empty file
    names; it is left out)."""
    return not any(part in ("", ".", "..") for part in name.split("/"))


def _entry(info: zipfile.ZipInfo) -> ZipMember:
    name_and_extra = len(info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437",
                                                   errors="replace")) + len(info.extra)
    return ZipMember(info.header_offset, info.compress_size, info.file_size, info.compress_type,
                 info.CRC, _LOCAL_HEADER.size + name_and_extra, bool(info.flag_bits & _ENCRYPTED))


def _inflated(name: str, key: str, raw: bytes, size: int) -> bytes:
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        # (at most the size the central directory declares: a zip bomb stops there)
        data = inflater.decompress(raw, size + 1)
    except zlib.error as e:
        raise StoreError(key, f"{name}: the deflated entry is corrupt: {e}") from None
    return data


class _RangedFile(io.RawIOBase):
    """The archive as a read-only file for `zipfile`: its last `TAIL_BYTES` fetched on the
    first read there and kept; reads elsewhere are ranged reads of their own."""

    def __init__(self, size: int, read_range: RangeReader) -> None:
        super().__init__()
        self.size = size
        self.position = 0
        self._read_range = read_range
        self._tail_start = max(0, size - TAIL_BYTES)
        self._tail: bytes | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError("seek before the start of the archive")  # (zipfile expects OSError)
        self.position = base + offset
        return self.position

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.position + size)
        start, self.position = self.position, max(self.position, end)
        if start >= end:
            return b""
        if start >= self._tail_start:
            if self._tail is None:
                self._tail = self._read_range(self._tail_start, self.size - self._tail_start)
            return self._tail[start - self._tail_start : end - self._tail_start]
        if end <= self._tail_start or self._tail is None:
            return self._read_range(start, end - start)
        # (a central directory larger than the tail: only what the tail lacks is read)
        return self._read_range(start, self._tail_start - start) + self._tail[: end - self._tail_start]

"""`data.nc` of a group directory: its arrays as NetCDF variables (`header` makes its header),
each variable's bytes being the array's flat view in big-endian (`region_file.RegionFile`), read as
the reader asks for them. Pure: no FUSE, no store of its own (the arrays have one).

The header needs only the arrays' descriptions (their metadata, known without reading the
store), so the file's size is known without opening any array (`ls -l` of a group of
thousands of arrays reads nothing); an array is opened when its bytes are first read.

Variables: every array of a fixed-size numeric type (bool as byte, with xarray's `dtype: bool`
so xarray reads booleans back), and fixed-length byte strings as char with one more dimension,
`<array>_strlen`. Dimensions: the arrays' names for them, `<array>_dim<i>` for unnamed ones,
`<name>_<length>` for a name met again with another length. Attributes: the arrays' and the
group's, `_FillValue` typed as its variable.

CDF-2 unless asked for CDF-5: an unsigned or 64-bit variable is served as the classic type
its member's `served` says (`classic_types`), its attributes likewise; where one has none,
the whole file is CDF-5 with every variable as its own type.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ...array import SEQUENTIAL_SLACK, Readahead
from ...formats import DataType
from ...grid import Box
from ..files import ReadOnlyFile, RegionArray
from ..netcdf_model import NC_CHAR, NC_DTYPES, Attribute, nc_type, valid_name
from ..placement import fill_number
from ..region_file import RegionFile
from .classic_types import classic_attribute, exactly_as
from .header import NcDataset, NcLayout, Variable

NC_NAME = "data.nc"
# Attributes that are xarray's bookkeeping in Zarr, said otherwise in NetCDF.
_NOT_COPIED = frozenset({"_ARRAY_DIMENSIONS", "_FillValue"})


@dataclass(frozen=True)
class Member:
    """An array of the group, as a variable."""

    name: str
    data_type: DataType
    shape: tuple[int, ...]
    dimension_names: tuple[str | None, ...] | None
    attributes: Mapping[str, Any]
    fill: object  # the variable's _FillValue: a number, text as CF writes it, or None: none
    array: Callable[[], RegionArray]  # opens it (MetadataError when it cannot be)
    # The big-endian type a classic file serves its elements as, where its own is CDF-5's
    # (`classic_types.served_type`); None: none holds them, or its own type is classic.
    served: np.dtype[Any] | None = None


@dataclass
class _Dimensions:
    lengths: dict[str, int] = field(default_factory=dict)
    renamed: list[str] = field(default_factory=list)  # what was said about names met again

    def name(self, wanted: str | None, fallback: str, length: int) -> str:
        name = wanted if wanted and valid_name(wanted) else fallback
        if self.lengths.setdefault(name, length) != length:
            renamed = f"{name}_{length}"
            self.renamed.append(f"dimension {name} of length {self.lengths[name]} is also met with "
                                f"length {length}: named {renamed} there")
            name = renamed
            self.lengths.setdefault(name, length)
        return name


@dataclass(frozen=True)
class NcGroupFile:
    """The file, and what it left out (array name -> why) or renamed."""

    file: NetcdfFile
    left_out: dict[str, str]
    notes: list[str]


def group_file(members: Sequence[Member], attributes: Mapping[str, Any], *,
               cdf5: bool = False) -> NcGroupFile:
    """The file of a group's `members`: classic (CDF-2) where every variable has a classic
    type, else (or with `cdf5`) CDF-5, every variable as its own type."""
    problems = {m.name: _problem(m) for m in members}
    held = [m for m in members if problems[m.name] is None]
    left_out = {name: problem for name, problem in problems.items() if problem is not None}
    file, notes = _file(held, attributes, classic=not cdf5)
    if file.layout.dataset.cdf5 and not cdf5:
        file, notes = _file(held, attributes, classic=False)
    return NcGroupFile(file, left_out, notes)


def _file(members: Sequence[Member], attributes: Mapping[str, Any], *,
          classic: bool) -> tuple[NetcdfFile, list[str]]:
    """The file, as classic types where `classic`, and what was said of dimensions renamed."""
    dimensions = _Dimensions()
    variables = tuple(_variable(member, dimensions, classic) for member in members)
    group_attributes = _attributes(attributes)
    if classic:
        group_attributes = tuple(map(classic_attribute, group_attributes))
    dataset = NcDataset(tuple(dimensions.lengths.items()), variables, group_attributes)
    served = [m.served if classic else None for m in members]
    return NetcdfFile(NcLayout(dataset), members, served), dimensions.renamed


def _problem(member: Member) -> str | None:
    data_type = member.data_type
    if not valid_name(member.name):
        return "its name is not a NetCDF name"
    if nc_type(data_type.storage) is None or data_type.kind not in ("bool", "int", "float", "bytes"):
        return f"NetCDF classic files have no {data_type.name} type"
    if 0 in member.shape:
        return "an axis of length 0 would be a record dimension"
    return None


def _variable(member: Member, dimensions: _Dimensions, classic: bool) -> Variable:
    names = member.dimension_names or (None,) * len(member.shape)
    dims = [dimensions.name(wanted, f"{member.name}_dim{i}", length)
            for i, (wanted, length) in enumerate(zip(names, member.shape, strict=True))]
    storage = member.served if classic and member.served is not None else member.data_type.storage
    type_ = nc_type(storage)
    assert type_ is not None  # (`_problem` said so)
    if type_ == NC_CHAR:
        dims.append(dimensions.name(None, f"{member.name}_strlen", storage.itemsize))
    attributes = _attributes(member.attributes)
    if classic:
        attributes = tuple(map(classic_attribute, attributes))
    fill = _fill(member.fill, type_)
    if fill is not None:
        attributes += (fill,)
    if member.data_type.kind == "bool" and "dtype" not in member.attributes:
        attributes += (Attribute.of("dtype", "bool"),)  # (xarray's mark of booleans kept as bytes)
    return Variable(member.name, tuple(dims), type_, attributes, math.prod(member.shape) * storage.itemsize)


def _attributes(attributes: Mapping[str, Any]) -> tuple[Attribute, ...]:
    return tuple(Attribute.of(name, value) for name, value in attributes.items()
                 if name not in _NOT_COPIED and valid_name(name))


def _fill(value: object, type_: int) -> Attribute | None:
    """`_FillValue` of the variable's type, from a number, CF's text for one (NaN, xarray's
    base64) or an element; None when there is none the type can hold."""
    if value is None or type_ == NC_CHAR:
        return None
    number: int | float | None
    if isinstance(value, bool | int | np.integer | np.bool_):
        number = int(value)
    else:
        number = fill_number(float(value) if isinstance(value, np.floating) else value)
    dtype = np.dtype(NC_DTYPES[type_])
    if number is None or (dtype.kind in "iu" and not _fits(number, dtype)):
        return None
    return Attribute.typed("_FillValue", [number], type_)


def _fits(number: float, dtype: np.dtype[Any]) -> bool:
    info = np.iinfo(dtype)
    return float(number).is_integer() and info.min <= number <= info.max


class NetcdfFile(ReadOnlyFile):
    """The header, then each variable's bytes at its `begin` (a read across variables is split)."""

    direct_io = False

    def __init__(self, layout: NcLayout, members: Sequence[Member],
                 served: Sequence[np.dtype[Any] | None]) -> None:
        """`served`: the type each member's elements are served as (None: its own)."""
        self.layout = layout
        self.members = members
        self._served = served
        self._data: dict[int, RegionFile] = {}

    def data(self, variable: int) -> RegionFile:
        """The variable's bytes: its array (opened now if it was not), as the header's shape."""
        found = self._data.get(variable)
        if found is None:
            member, served = self.members[variable], self._served[variable]
            whole = Box((0,) * len(member.shape), member.shape)
            convert = None if served is None else (lambda values: exactly_as(values, served))
            found = self._data[variable] = RegionFile(member.array(), whole, "big", served=convert,
                                                      served_dtype=served)
        return found

    @property
    def size(self) -> int:
        return self.layout.size

    def read(self, offset: int, size: int) -> bytes | memoryview:
        parts: list[bytes | memoryview] = []
        for piece in self.layout.pieces(offset, size):
            if piece.variable is None:
                parts.append(self.layout.header[piece.start : piece.stop])
                continue
            data = self.data(piece.variable)
            parts.append(data.read(piece.start, piece.stop - piece.start))
            parts.append(bytes(max(0, piece.stop - max(piece.start, data.size))))  # (padding)
        parts = [p for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)

    def prefetch(self, offset: int, size: int) -> None:
        for piece in self.layout.pieces(offset, size):
            if piece.variable is not None:
                self.data(piece.variable).prefetch(piece.start, piece.stop - piece.start)

    def readahead(self) -> NetcdfReading:
        return NetcdfReading(self)


class NetcdfReading:
    """The reading ahead of one open data.nc: each variable's own (`RegionFile.readahead`, its
    slabs decoded ahead in big-endian), for requests inside that variable's bytes; the header,
    padding and requests across variables are read at once (a few bytes, or once per variable).
    A variable read to its end gives its slabs back: the next one's may need the room (a reader
    of the whole file, as nccopy), while a reader going through several variables side by side
    (time steps of each in turn) keeps each one's.

    `ready` is called on the event loop, so it answers only from variables read before (their
    arrays open: opening one may wait on the store); `read`, on workers, several at once."""

    def __init__(self, file: NetcdfFile) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._variables: dict[int, Readahead] = {}
        self._last_end = 0  # of the reader's last request, in the file

    def ready(self, offset: int, size: int) -> bytes | memoryview | None:
        inside = self._inside(offset, size)
        if inside is None:
            return None
        with self._lock:
            reader = self._variables.get(inside.variable)
        found = None if reader is None else reader.ready(inside.start, inside.stop - inside.start)
        if found is not None:
            self._close_finished(offset, size)
        return found

    def read(self, offset: int, size: int) -> bytes | memoryview:
        inside = self._inside(offset, size)
        with self._lock:  # (a reader in order enters each variable from the one before it)
            in_order, self._last_end = abs(offset - self._last_end) <= SEQUENTIAL_SLACK, offset + size
        if inside is None:
            found = self._file.read(offset, size)
        else:
            reader = self._reader(inside.variable, inside.start if in_order else None)
            found = reader.read(inside.start, inside.stop - inside.start)
        self._close_finished(offset, size)
        return found

    def variables(self) -> dict[int, Readahead]:
        """The variables' readaheads begun, by index (a copy: for looking at, as the tests do)."""
        with self._lock:
            return dict(self._variables)

    def close(self) -> None:
        with self._lock:
            readers, self._variables = list(self._variables.values()), {}
        for reader in readers:
            reader.close()

    def _reader(self, variable: int, continues_from: int | None) -> Readahead:
        """The variable's readahead; begun now, it goes on from `continues_from`, where a
        reader in order entered it (None: at random)."""
        with self._lock:
            reader = self._variables.get(variable)
        if reader is None:
            made = self._file.data(variable).readahead()  # (outside the lock: it may open the array)
            if continues_from is not None:
                made.continue_from(continues_from)
            with self._lock:
                reader = self._variables.setdefault(variable, made)
        return reader

    def _close_finished(self, offset: int, size: int) -> None:
        """Close the readahead of each variable whose last bytes were just read."""
        variables = self._file.layout.dataset.variables
        ended = [p.variable for p in self._file.layout.pieces(offset, size)
                 if p.variable is not None and p.stop >= variables[p.variable].nbytes]
        with self._lock:
            readers = [r for r in (self._variables.pop(v, None) for v in ended) if r is not None]
        for reader in readers:
            reader.close()

    def _inside(self, offset: int, size: int) -> _Inside | None:
        """Where bytes [offset, offset + size) lie in one variable's bytes (padding aside), or
        None when they do not all lie in one."""
        pieces = self._file.layout.pieces(offset, size)
        if len(pieces) != 1:
            return None
        variable, start, stop = pieces[0]
        if variable is None or stop > self._file.layout.dataset.variables[variable].nbytes:
            return None
        return _Inside(variable, start, stop)


class _Inside(NamedTuple):
    variable: int
    start: int
    stop: int

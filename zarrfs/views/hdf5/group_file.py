"""`data.h5` of a group directory: the group's arrays as datasets named as the arrays, its
subgroups as HDF5 groups to any depth, and the groups' attributes, in NetCDF-4's data model.

Each dataset is an array's file's dataset (`hdf5_view.dataset_header`, its chunks passed
through by `dataset_chunks`). The dimensions are shared by name within a group and with the
groups below it, as netCDF-4 shares them: a 1-D array named as its dimension is the
coordinate variable and is itself the dimension's scale; a dimension without one is netCDF's
phony scale dataset. When arrays give
one name different lengths, the length of the coordinate variable (else of the first array by
name) keeps the name and each other length gets a dimension of its own, `NAME_LENGTH`, and a
note: netCDF-4 allows one length a name, xarray opens such a group then, and the arrays keep
their values. An array named as a dimension it is not the coordinate of is stored as netCDF-C
stores it, `_nc4_non_coord_NAME` (netCDF-C and h5netcdf read it as NAME).

The layout: the superblock; the object headers of every group, dataset and phony scale; the
global heap collections of the datasets' DIMENSION_LIST references; then each dataset's index
and chunk slots. Every size is known from the metadata before any address, so the headers are
made twice: once to size them, once with the addresses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import structures as h5
from .array_file import AnyDataset, named_dimensions
from .attributes import attribute_messages
from .dataset_chunks import ChunkedFile, DatasetPart, Tails
from .dimensions import Attached, dimension_list, global_heap, scale_attributes, scale_header

NON_COORDINATE = "_nc4_non_coord_"  # (netCDF-C's prefix of a variable named as another's dimension)
_HEAP_OBJECTS = 4096  # references a heap collection holds here (its numbers are 16-bit)


@dataclass(frozen=True)
class H5Group:
    """What a group's file shows of a group: its attributes, its arrays (those a dataset can
    hold, as datasets), its subgroups."""

    attributes: Mapping[str, Any]
    datasets: Mapping[str, AnyDataset]
    groups: Mapping[str, H5Group]


@dataclass
class _Variable:
    path: str  # (its key: the group's path and its name)
    link: str
    dataset: AnyDataset
    dimensions: tuple[str, ...] | None  # (None: netCDF's phony dimensions)
    coordinate: bool = False


@dataclass
class _Group:
    path: str
    attributes: Mapping[str, Any]
    variables: list[_Variable]
    lengths: dict[str, int]  # the group's dimensions
    scales: dict[str, str] = field(default_factory=dict)  # dimension -> its scale's key
    groups: list[tuple[str, str]] = field(default_factory=list)  # (name, key)


@dataclass(frozen=True)
class H5GroupFile:
    file: ChunkedFile
    notes: list[str]  # (dimensions renamed: for the log)


def group_file(root: H5Group) -> H5GroupFile:
    notes: list[str] = []
    groups = list(_planned("", root, notes, {}))
    layout = _Layout(groups)
    return H5GroupFile(layout.file(), notes)


def _planned(path: str, group: H5Group, notes: list[str],
             above: Mapping[str, tuple[int, str]]) -> Iterator[_Group]:
    """The group at `path` and every group below it, their dimensions resolved. A dimension
    of a group above (`above`: name -> length and scale) of the same length is that one, as a
    netCDF-4 group sees its parents' (xarray's DataTree inherits their coordinates so); a
    coordinate variable of the group's own makes a dimension of its own."""
    variables, lengths = _dimensions(path, group.datasets, set(group.groups), notes)
    planned = _Group(path, group.attributes, variables, lengths)
    for dimension, length in lengths.items():
        coordinate = next((v for v in variables if v.coordinate and v.link == dimension), None)
        inherited = above.get(dimension)
        if coordinate is not None:
            planned.scales[dimension] = coordinate.path
        elif inherited is not None and inherited[0] == length:
            planned.scales[dimension] = inherited[1]
        else:
            planned.scales[dimension] = phony_key(path, dimension)
    planned.groups = [(name, f"{path}/{name}") for name in sorted(group.groups)]
    yield planned
    seen = {**above, **{d: (length, planned.scales[d]) for d, length in lengths.items()}}
    for name in sorted(group.groups):
        yield from _planned(f"{path}/{name}", group.groups[name], notes, seen)


def phony_key(path: str, dimension: str) -> str:
    """The key of a phony scale: the group's path and the dimension's name."""
    return f"{path}/{dimension} (scale)"


def _dimensions(path: str, datasets: Mapping[str, AnyDataset], groups: set[str],
                notes: list[str]) -> tuple[list[_Variable], dict[str, int]]:
    """The group's variables with their dimensions' names, and the dimensions' lengths:
    coordinate variables first, so their lengths keep their names. An array naming a
    dimension as a subgroup is named (a scale of that name would be a second link of the
    name) has netCDF's phony dimensions."""
    named = {name: named_dimensions(dataset.array) for name, dataset in datasets.items()}
    named = {name: None if dims is None or groups & set(dims) else dims for name, dims in named.items()}
    coordinates = {name for name, dims in named.items() if dims == (name,)}
    lengths: dict[str, int] = {}
    variables = []
    for name in sorted(datasets, key=lambda n: (n not in coordinates, n)):
        dims, shape = named[name], tuple(datasets[name].array.shape)
        if dims is not None:
            dims = tuple(_length_named(name, dims[i], shape[i], i, lengths, {*datasets, *groups}, notes)
                         for i in range(len(dims)))
        variables.append(_Variable(f"{path}/{name}", name, datasets[name], dims, name in coordinates))
    for variable in variables:
        if variable.link in lengths and not variable.coordinate:
            variable.link = NON_COORDINATE + variable.link
    return variables, lengths


def _length_named(array: str, name: str, length: int, axis: int, lengths: dict[str, int],
                  taken: set[str], notes: list[str]) -> str:
    """The dimension of `length` for `name`: `name` itself unless it has another length."""
    if lengths.setdefault(name, length) == length:
        return name
    renamed = f"{name}_{length}"
    while lengths.get(renamed, length) != length or (renamed in taken and renamed not in lengths):
        renamed += "_"
    lengths[renamed] = length
    notes.append(f"array {array}'s dimension {axis} is named {renamed}, not {name} (length "
                 f"{length}, not {lengths[name]})")
    return renamed


class _Layout:
    """Addresses of every object of the file, then the objects made with them."""

    def __init__(self, groups: Sequence[_Group]) -> None:
        self.groups = groups
        self.variables = {v.path: v for g in groups for v in g.variables}
        self.scales = {key: (g, d) for g in groups for d, key in g.scales.items()
                       if key == phony_key(g.path, d)}  # (the phony ones, each in its group)
        self.heap_objects, self.heap_places = _heap_objects(groups)
        self.fill_heaps = {key: heap for key, v in self.variables.items() if (heap := v.dataset.fill_heap())}
        self.at: dict[str, int] = {}
        self.chunks: dict[str, DatasetPart] = {}
        self.tails = Tails()  # (the strings' heaps, after every dataset's chunks)
        made = self._headers(lambda key: 0)  # (their sizes: no address changes one)
        at = h5.FILE_HEAD_SIZE
        for key, header in made.items():
            self.at[key] = at
            at += len(header)
        for key, variable in self.variables.items():
            self.chunks[key] = variable.dataset.chunks(at, self.tails)
            at = self.chunks[key].end

    def file(self) -> ChunkedFile:
        head = b"".join(self._headers(self.at.__getitem__).values())
        head = h5.file_head(0) + head
        return ChunkedFile(head, list(self.chunks.values()), self.tails)

    def _headers(self, at: Callable[[str], int]) -> dict[str, bytes]:
        """Every object's bytes, in file order, made with the addresses `at` gives."""
        made = {g.path or "/": self._group(g, at) for g in self.groups}
        made.update({key: self._dataset(v, at) for key, v in self.variables.items()})
        made.update({key: scale_header(g.lengths[d], self._attached(key, at))
                     for key, (g, d) in self.scales.items()})
        for number, keys in enumerate(self.heap_objects):
            made[f"heap {number}"] = global_heap([at(key) for key in keys])
        made.update({f"fill {key}": heap for key, heap in self.fill_heaps.items()})
        return made

    def _group(self, group: _Group, at: Callable[[str], int]) -> bytes:
        links = [*((v.link, at(v.path)) for v in group.variables),
                 *((d, at(key)) for d, key in group.scales.items() if key == phony_key(group.path, d)),
                 *((name, at(key)) for name, key in group.groups)]
        attributes = attribute_messages(group.attributes, np.dtype("f8"), None)
        return h5.object_header([*h5.group_messages(links), *attributes])

    def _dataset(self, variable: _Variable, at: Callable[[str], int]) -> bytes:
        chunks = self.chunks.get(variable.path)
        part_at = chunks.start if chunks else 0
        extra = []
        if variable.coordinate:
            extra = scale_attributes(variable.link, self._attached(variable.path, at))
        elif variable.dimensions:
            heap, first = self.heap_places[variable.path]
            extra = [dimension_list(at(f"heap {heap}"), first, len(variable.dimensions))]
        fill_at = at(f"fill {variable.path}") if variable.path in self.fill_heaps else 0
        return variable.dataset.header(part_at, extra, fill_at)

    def _attached(self, scale: str, at: Callable[[str], int]) -> list[Attached]:
        """The variables, in any group, whose dimensions `scale` is the scale of (a coordinate
        variable, itself left out)."""
        return [(at(v.path), axis) for g in self.groups for v in g.variables
                if v.dimensions and v.path != scale
                for axis, name in enumerate(v.dimensions) if g.scales[name] == scale]


def _heap_objects(groups: Sequence[_Group]) -> tuple[list[list[str]], dict[str, tuple[int, int]]]:
    """The keys of the scales each heap collection references, objects 1, 2, ... in order (a
    variable's dimensions consecutive in one collection), and where each variable's start:
    (collection, object)."""
    collections: list[list[str]] = [[]]
    places: dict[str, tuple[int, int]] = {}
    for group in groups:
        for variable in group.variables:
            if variable.coordinate or not variable.dimensions:
                continue
            if len(collections[-1]) + len(variable.dimensions) > _HEAP_OBJECTS:
                collections.append([])
            places[variable.path] = (len(collections) - 1, len(collections[-1]) + 1)
            collections[-1] += [group.scales[d] for d in variable.dimensions]
    return [keys for keys in collections if keys], places

"""Header files that let legacy tools open an array's flat `data` file (pure: no I/O, no FUSE).

Each function returns the bytes of a small header describing `data` (dtype in the file's byte
order, shape in C axis order, `fortran` when `data` is laid out in Fortran order), or None when
the format cannot describe that element type or rank.  `.npy` is a prefix (header + data form one
file); NRRD, MetaImage and VRT are detached headers naming `data_file`, relative to themselves.
Where the elements are and what they mean (spacing, origin, geotransform, CRS, no-data value,
packing, band names, units) comes from a `Placement`; the empty one adds nothing.
"""

from __future__ import annotations

import io
import math
import sys
import warnings
from collections.abc import Iterable, Sequence
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
from numpy.lib import format as npy_format

from ..placement import NOWHERE, Placement

__all__ = ["mhd_header", "npy_header", "nrrd_header", "vrt_header"]

_NRRD_TYPES = {
    ("i", 1): "int8", ("u", 1): "uint8", ("i", 2): "int16", ("u", 2): "uint16",
    ("i", 4): "int32", ("u", 4): "uint32", ("i", 8): "int64", ("u", 8): "uint64",
    ("f", 4): "float", ("f", 8): "double",
}
_MET_TYPES = {
    ("i", 1): "MET_CHAR", ("u", 1): "MET_UCHAR", ("i", 2): "MET_SHORT", ("u", 2): "MET_USHORT",
    ("i", 4): "MET_INT", ("u", 4): "MET_UINT", ("i", 8): "MET_LONG_LONG", ("u", 8): "MET_ULONG_LONG",
    ("f", 4): "MET_FLOAT", ("f", 8): "MET_DOUBLE",
}
# GDAL 3.6 has no Int8 (added in 3.7) and no half float.
_GDAL_TYPES = {
    ("u", 1): "Byte", ("i", 2): "Int16", ("u", 2): "UInt16", ("i", 4): "Int32", ("u", 4): "UInt32",
    ("i", 8): "Int64", ("u", 8): "UInt64", ("f", 4): "Float32", ("f", 8): "Float64",
    ("c", 8): "CFloat32", ("c", 16): "CFloat64",
}
_NRRD_MAX_DIM = 16  # teem's NRRD_DIM_MAX
_INT32_MAX = 2**31 - 1  # GDAL keeps raster sizes and pixel offsets in C ints


def npy_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool) -> bytes | None:
    """The .npy header that, followed by `data`, makes a file `np.load` reads as the array."""
    if dtype.hasobject:
        return None
    with warnings.catch_warnings():
        # numpy warns (and falls back to a lossy descr) for user dtypes such as bfloat16.
        warnings.simplefilter("ignore")
        descr = npy_format.dtype_to_descr(dtype)
    try:
        if npy_format.descr_to_dtype(descr) != dtype:
            return None
    except (TypeError, ValueError):
        return None
    header = {"descr": descr, "fortran_order": fortran and _orders_differ(shape), "shape": tuple(shape)}
    for writer in (npy_format.write_array_header_1_0, npy_format.write_array_header_2_0):
        buffer = io.BytesIO()
        try:
            writer(buffer, header)
        except ValueError:  # header longer than version 1.0's 16-bit length field
            continue
        except UnicodeEncodeError:  # non-latin-1 field names need version 3.0, which has no public writer
            return None
        return buffer.getvalue()
    return None


def nrrd_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool, data_file: str = "data", *,
                placement: Placement = NOWHERE) -> bytes | None:
    """A detached NRRD0004 header for `data`; axes are listed fastest first. With an origin
    (or an axis whose coordinates decrease) the axes are placed in a space of their own
    dimension (`space directions`, `space origin`), which NRRD allows instead of `spacings`."""
    name = _NRRD_TYPES.get(_scalar_key(dtype))
    if name is None or not 1 <= len(shape) <= _NRRD_MAX_DIM or not _positive(shape):
        return None
    _check_file_name(data_file)
    lines = ["NRRD0004", "# zarrfs: header for the flat raw data file", f"type: {name}",
             f"dimension: {len(shape)}", "sizes: " + _fastest_first(shape, fortran)]
    spacings = placement.spacing
    if _has_origin(placement) or any(placement.flipped or ()):
        lines += _nrrd_space(placement, spacings, shape, fortran)
    elif spacings is not None:
        lines.append("spacings: " + _fastest_first(_checked_spacings(spacings, shape), fortran))
    if dtype.itemsize > 1:
        lines.append("endian: " + ("little" if _is_little(dtype) else "big"))
    lines += ["encoding: raw", f"data file: {data_file}"]
    return ("\n".join(lines) + "\n").encode()


def mhd_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool, data_file: str = "data", *,
               placement: Placement = NOWHERE) -> bytes | None:
    """A MetaImage (.mhd) header for `data`; DimSize is fastest first."""
    name = _MET_TYPES.get(_scalar_key(dtype))
    if name is None or not shape or not _positive(shape):
        return None
    _check_file_name(data_file)
    msb = "False" if _is_little(dtype) else "True"
    lines = ["ObjectType = Image", f"NDims = {len(shape)}", "BinaryData = True",
             f"BinaryDataByteOrderMSB = {msb}", "CompressedData = False",
             "DimSize = " + _fastest_first(shape, fortran)]
    spacings = placement.spacing
    if placement.origin is not None and _has_origin(placement):
        lines.append("Offset = " + _fastest_first(_checked_origin(placement.origin, shape), fortran))
    if any(placement.flipped or ()):
        lines.append("TransformMatrix = " + " ".join(" ".join(map(_number, row))
                                                     for row in _directions(placement, shape, fortran)))
    if spacings is not None:
        lines.append("ElementSpacing = " + _fastest_first(_checked_spacings(spacings, shape), fortran))
    # MetaIO stops reading at ElementDataFile, so it has to be the last line.
    lines += [f"ElementByteOrderMSB = {msb}", f"ElementType = {name}", f"ElementDataFile = {data_file}"]
    return ("\n".join(lines) + "\n").encode()


def vrt_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran: bool,
               data_file: str = "data", *, placement: Placement = NOWHERE) -> bytes | None:
    """A GDAL VRT over `data`: rank 2 is one band of shape[0] lines, rank 3 is shape[0] bands,
    georeferenced, with no-data value, packing, band names and units, as far as `placement`
    knows them."""
    name = _GDAL_TYPES.get(_scalar_key(dtype))
    if name is None or len(shape) not in (2, 3) or not _positive(shape):
        return None
    bands, lines, pixels = (1, *shape) if len(shape) == 2 else shape
    size = dtype.itemsize
    if fortran:  # element [b, i, j] sits at b + i*bands + j*bands*lines
        band_step, pixel_step, line_step = size, bands * lines * size, bands * size
    else:
        band_step, pixel_step, line_step = lines * pixels * size, size, pixels * size
    if max(lines, pixels, bands, pixel_step, line_step) > _INT32_MAX:
        return None
    order = "LSB" if _is_little(dtype) else "MSB"
    out = [f'<VRTDataset rasterXSize="{pixels}" rasterYSize="{lines}">', *_vrt_georeferencing(placement)]
    names = placement.band_names if placement.band_names and len(placement.band_names) == bands else None
    for band in range(bands):
        out += [
            f'  <VRTRasterBand dataType="{name}" band="{band + 1}" subClass="VRTRawRasterBand">',
            *([f"    <Description>{escape(names[band])}</Description>"] if names else []),
            *_vrt_band_values(placement),
            f'    <SourceFilename relativeToVRT="1">{escape(data_file)}</SourceFilename>',
            f"    <ImageOffset>{band * band_step}</ImageOffset>",
            f"    <PixelOffset>{pixel_step}</PixelOffset>",
            f"    <LineOffset>{line_step}</LineOffset>",
            f"    <ByteOrder>{order}</ByteOrder>",
            "  </VRTRasterBand>",
        ]
    out.append("</VRTDataset>")
    return ("\n".join(out) + "\n").encode()


def _vrt_georeferencing(placement: Placement) -> list[str]:
    out = []
    if placement.crs is not None:
        out.append(f"  <SRS>{escape(placement.crs)}</SRS>")
    if placement.geotransform is not None:
        out.append(f"  <GeoTransform>{', '.join(map(_number, placement.geotransform))}</GeoTransform>")
    return out


def _vrt_band_values(placement: Placement) -> list[str]:
    out = []
    if placement.nodata is not None:
        out.append(f"    <NoDataValue>{_number(placement.nodata)}</NoDataValue>")
    if placement.units is not None:
        out.append(f"    <UnitType>{escape(placement.units)}</UnitType>")
    if placement.offset is not None:
        out.append(f"    <Offset>{_number(placement.offset)}</Offset>")
    if placement.scale is not None:
        out.append(f"    <Scale>{_number(placement.scale)}</Scale>")
    if placement.units is not None:
        units = escape(placement.units, {'"': "&quot;"})
        out.append(f'    <Metadata><MDI key="units">{units}</MDI></Metadata>')
    return out


def _has_origin(placement: Placement) -> bool:
    """An origin other than the readers' default (zero: the header as without one)."""
    return placement.origin is not None and any(v != 0 for v in placement.origin)


def _nrrd_space(placement: Placement, spacings: Sequence[float] | None, shape: tuple[int, ...],
                fortran: bool) -> list[str]:
    """The axes as vectors of a space with one dimension per axis, scaled and signed."""
    steps = _checked_spacings(spacings, shape) if spacings is not None else [1.0] * len(shape)
    rows = _directions(placement, shape, fortran)
    ordered = steps if fortran else steps[::-1]
    vectors = [_nrrd_vector(v * step for v in row) for row, step in zip(rows, ordered, strict=True)]
    origin = _checked_origin(placement.origin or [0.0] * len(shape), shape)
    return [f"space dimension: {len(shape)}", "space directions: " + " ".join(vectors),
            "space origin: " + _nrrd_vector(origin if fortran else origin[::-1])]


def _nrrd_vector(values: Iterable[float]) -> str:
    return "(" + ",".join(_number(v) for v in values) + ")"


def _directions(placement: Placement, shape: tuple[int, ...], fortran: bool) -> list[list[float]]:
    """Unit direction of each axis (fastest first): -1 along an axis whose coordinates decrease."""
    flipped = list(placement.flipped or [False] * len(shape))
    if len(flipped) != len(shape):
        raise ValueError(f"flipped must have {len(shape)} entries, got {flipped}")
    signs = [-1.0 if f else 1.0 for f in (flipped if fortran else flipped[::-1])]
    return [[sign if i == j else 0.0 for j in range(len(shape))] for i, sign in enumerate(signs)]


def _checked_origin(origin: Sequence[float], shape: tuple[int, ...]) -> list[float]:
    values = [float(v) for v in origin]
    if len(values) != len(shape) or not all(math.isfinite(v) for v in values):
        raise ValueError(f"origin must be {len(shape)} finite numbers, got {list(origin)}")
    return values


def _scalar_key(dtype: np.dtype[Any]) -> tuple[str, int]:
    """(kind, itemsize) of a plain numeric dtype; bool reads as uint8, datetimes as their int64 count."""
    kind = dtype.kind
    if kind == "b":
        return ("u", 1)
    if kind in "mM":
        return ("i", 8)
    # ml_dtypes types (bfloat16, float8, int4) report kind "V" and are left out here.
    if kind in "iufc" and dtype.names is None and dtype.subdtype is None:
        return (kind, dtype.itemsize)
    return ("", 0)  # in no table


def _is_little(dtype: np.dtype[Any]) -> bool:
    order = dtype.byteorder
    return order == "<" or (order in "=|" and sys.byteorder == "little")


def _orders_differ(shape: tuple[int, ...]) -> bool:
    """False when C and Fortran layouts hold the same bytes (as numpy then writes fortran_order False)."""
    return 0 not in shape and sum(1 for n in shape if n > 1) > 1


def _positive(shape: tuple[int, ...]) -> bool:
    # These formats reject zero-length axes; an empty array has nothing to show anyway.
    return all(n > 0 for n in shape)


def _fastest_first(values: Sequence[Any], fortran: bool) -> str:
    ordered = list(values) if fortran else list(reversed(values))
    return " ".join(_number(v) for v in ordered)


def _number(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return repr(float(value))
    return str(int(value))


def _checked_spacings(spacings: Sequence[float], shape: tuple[int, ...]) -> list[float]:
    values = [float(s) for s in spacings]
    if len(values) != len(shape) or not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"spacings must be {len(shape)} positive finite numbers, got {list(spacings)}")
    return values


def _check_file_name(name: str) -> None:
    # NRRD and MetaIO read a name with spaces as a file-list pattern; a newline would end the header.
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"data file name must be non-empty without whitespace: {name!r}")


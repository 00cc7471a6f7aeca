"""Every dataset of an HDF5 file as a reader of the h5py kind reads it, as JSON: h5py 2.7.1 on
HDF5 1.8.18 (run as a script by .venv-hdf5-1.8's Python 3.6, which scripts/install makes) and
pyfive (imported by tests/helpers/old_hdf5_readers.py, which calls `dump` in its own process).

    python read_h5.py FILE OUT.json [--dataset NAME --region 0:16,32:48]

OUT.json: {"reader": ..., "datasets": {name: {"shape", "dtype", "chunks", "fillvalue",
"attrs", "values", "types", "missing_chunks", "error"}}}, every dataset of every group, by its
path without the leading "/". `values`: the elements in C order, each as `plain` makes it (a
str, a number, a non-finite float as "NaN"/"Infinity"/"-Infinity", bytes as {"bytes": hex});
`types`: the Python types of the elements as the reader returned them (str or bytes,
say); `attrs_low_level`: the attributes h5py 2.7.1 read only through its low-level API
(`fixed_text`); `error`: why the values could not be read (zstd chunks: no reader here has the
filter), the metadata being there all the same. --dataset and --region read only that
region of that dataset (a chunk of an array of 10^6 chunks).

Python 3.6 runs this file: no f-string `=`, no walrus, no postponed annotations, no
zip(strict=).
"""
# ruff: noqa: B905

import argparse
import itertools
import json
import math
import sys
import warnings


def plain(value):
    """`value` (an attribute, a fill value, an element) as JSON holds it exactly."""
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, int):
        return value
    if hasattr(value, "tolist"):  # (a numpy array or scalar)
        return plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return {"repr": repr(value)}


def walk(group, prefix=""):
    """(path, dataset) of every dataset under `group`, groups entered depth first; (path,
    the exception) for an object the reader could not open."""
    for key in sorted(group.keys()):
        path = prefix + key
        try:
            item = group[key]
        except Exception as e:
            yield path, e
            continue
        if hasattr(item, "dtype") and hasattr(item, "shape"):
            yield path, item
        else:
            yield from walk(item, path + "/")


def flat(data):
    """The elements of what a read returned, in C order, as Python objects."""
    if isinstance(data, (str, bytes)):  # (a scalar string)
        return [data]
    if hasattr(data, "ravel"):
        return data.ravel().tolist()
    return [data]


def corners(shape, chunks):
    return itertools.product(*[range(0, n, c) for n, c in zip(shape, chunks)])


def pyfive_read(dataset, numpy):
    """The dataset's values as pyfive reads them, and how many of its chunks are missing.

    pyfive 1.3 raises KeyError for a chunk the index does not hold (a chunk never written)
    instead of reading it as the fill value, unless the dataset has no chunk at all: such
    a dataset is read chunk by chunk, its missing chunks filled with its fill value as
    pyfive reads it from the file."""
    if dataset.chunks is None or dataset.id.get_num_chunks() == 0:
        return dataset[()], 0
    missing = []
    for corner in corners(dataset.shape, dataset.chunks):
        try:
            dataset.id.get_chunk_info_by_coord(corner)
        except KeyError:
            missing.append(corner)
    if not missing:
        return dataset[()], 0
    out = numpy.empty(dataset.shape, dtype=dataset.dtype)
    out[...] = dataset.fillvalue
    absent = set(missing)
    for corner in corners(dataset.shape, dataset.chunks):
        if corner not in absent:
            region = tuple(slice(a, min(a + c, n)) for a, c, n in zip(corner, dataset.chunks, dataset.shape))
            out[region] = dataset[region]
    return out, len(missing)


def fixed_text(dataset, name, numpy):
    """Attribute `name` of fixed-length strings read with its own type, or None if it is not
    one. h5py 2.7.1 reads such strings in memory as ASCII and HDF5 converts no string from
    one character set to another: UTF-8 ones fail with "no appropriate function for
    conversion path" (netCDF-C writes its text attributes in ASCII)."""
    import h5py

    attribute = h5py.h5a.open(dataset.id, name.encode())
    kind = attribute.get_type()
    if not isinstance(kind, h5py.h5t.TypeStringID) or kind.is_variable_str():
        return None
    out = numpy.zeros(attribute.shape, dtype=f"S{kind.get_size()}")
    attribute.read(out, mtype=kind)
    return out[()]


def describe(dataset, reader, numpy, region=None):
    if isinstance(dataset, Exception):
        return {"shape": None, "error": f"{type(dataset).__name__}: {dataset}"}
    found = {"shape": list(dataset.shape), "dtype": dataset.dtype.str,
             "chunks": list(dataset.chunks) if dataset.chunks else None,
             "values": None, "types": [], "missing_chunks": 0, "error": None}
    try:
        found["fillvalue"] = plain(dataset.fillvalue)
    except Exception as e:  # (a reader's failure is recorded, and compared by the test)
        found["fillvalue"] = {"error": f"{type(e).__name__}: {e}"}
    attrs, low_level = {}, []
    for name in dataset.attrs:
        try:
            attrs[name] = plain(dataset.attrs[name])
        except Exception as e:
            text = fixed_text(dataset, name, numpy) if reader.startswith("h5py") else None
            if text is None:
                attrs[name] = {"error": f"{type(e).__name__}: {e}"}
            else:
                attrs[name] = plain(text)
                low_level.append(name)
    found["attrs"], found["attrs_low_level"] = attrs, low_level
    try:
        if region is not None:
            data = dataset[region]
        elif reader.startswith("pyfive"):
            data, found["missing_chunks"] = pyfive_read(dataset, numpy)
        else:
            data = dataset[()]
    except Exception as e:
        found["error"] = f"{type(e).__name__}: {e}"
        return found
    elements = flat(data)
    found["values"] = [plain(v) for v in elements]
    found["types"] = sorted({type(v).__name__ for v in elements})
    return found


def dump(opened, reader, numpy, only=None, region=None):
    """Every dataset of the open file `opened` (or only the dataset `only`, its `region`)."""
    datasets = {}
    for path, dataset in walk(opened):
        if only is None or path == only:
            datasets[path] = describe(dataset, reader, numpy, region)
    return {"reader": reader, "datasets": datasets}


def region_of(text):
    """"0:16,32:48" as a tuple of slices."""
    return tuple(slice(*[int(n) for n in part.split(":")]) for part in text.split(","))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("out")
    parser.add_argument("--dataset")
    parser.add_argument("--region", type=region_of)
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (h5py 2.7.1's FutureWarnings of numpy's)
        import h5py
        import numpy
    reader = f"h5py {h5py.version.version} (HDF5 {h5py.version.hdf5_version}, numpy {numpy.__version__})"
    with h5py.File(args.file, "r") as opened:
        result = dump(opened, reader, numpy, args.dataset, args.region)
    with open(args.out, "w") as out:
        json.dump(result, out, allow_nan=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

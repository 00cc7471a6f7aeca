"""The Zarr v2 interop matrix, groups: every array of both writers (zarr-python 3 and
TensorStore) read through one mount of a v2 group, a few through a consolidated group,
compared with each writer's own reading (tests/helpers/v2_oracles.py)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import Mount, mounted
from tests.helpers.v2_cases import SPECS, Spec
from tests.helpers.v2_oracles import (
    check_array,
    check_zarr_python_metadata,
    scratch_root,
    tensorstore_oracle,
    write_tensorstore,
    write_zarr_python,
    zarray_for,
)

# -- reads: every array of both writers in one v2 group -----------------------------------------

ZGROUP = '{\n  "zarr_format": 2\n}'
WRITERS = ("zarr-python", "tensorstore")
IN_GROUP = [(w, c) for w in WRITERS for c, s in SPECS.items()
            if (s.tensorstore if w == "tensorstore" else not s.tensorstore_defaults)]


@dataclass
class Group:
    store: Path
    mount: Mount
    written: dict[tuple[str, str], np.ndarray]


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    """/ (with attributes), /zarr-python/<case> and /tensorstore/<case>, mounted once."""
    store = Path(tempfile.mkdtemp(prefix="zarrfs-v2-group-", dir=scratch_root()))
    try:
        (store / ".zgroup").write_text(ZGROUP)
        (store / ".zattrs").write_text('{"matrix": "v2"}')
        for writer in WRITERS:
            (store / writer).mkdir()
            (store / writer / ".zgroup").write_text(ZGROUP)
        written = {}
        for writer, case in IN_GROUP:
            spec, path = SPECS[case], store / writer / case
            if writer == "zarr-python":
                written[writer, case] = write_zarr_python(spec, str(path))
                check_zarr_python_metadata(spec, path)
            else:
                write_tensorstore(spec, str(path), zarray_for(spec))
                written[writer, case] = tensorstore_oracle(spec, path)
        with mounted(store, tmp_path_factory.mktemp("v2group") / "mnt", ("ro",)) as mount:
            yield Group(store, mount, written)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def test_group_lists_its_nodes(group: Group) -> None:
    root = group.mount.path
    assert sorted(os.listdir(root)) == sorted([".zattrs", ".zgroup", "data.h5", "data.nc", *WRITERS])
    for name in (".zattrs", ".zgroup", "zarr-python/.zgroup", "tensorstore/.zgroup"):
        assert (root / name).read_bytes() == (group.store / name).read_bytes()
    for writer in WRITERS:
        cases = [c for w, c in IN_GROUP if w == writer]
        assert sorted(os.listdir(root / writer)) == sorted([".zgroup", "data.h5", "data.nc", *cases])


@pytest.mark.parametrize(("writer", "case"), IN_GROUP, ids=[f"{w}-{c}" for w, c in IN_GROUP])
def test_array_in_group(writer: str, case: str, group: Group) -> None:
    check_array(SPECS[case], group.store / writer / case, group.mount.path / writer / case,
                group.written[writer, case])


def _expected_xattrs(spec: Spec, store: Path) -> dict[str, Any]:
    view = spec.np_dtype.newbyteorder("<")
    attributes = json.loads((store / ".zattrs").read_bytes()) if (store / ".zattrs").exists() else {}
    return {
        "user.zarr.shape": ",".join(map(str, spec.shape)),
        "user.zarr.chunks": ",".join(map(str, spec.chunks)),
        "user.zarr.dtype": json.loads(json.dumps(view.descr)) if view.names else view.str,
        "user.zarr.dimension_names": None,
        "user.zarr.attributes": attributes,
    }


def test_xattrs_in_group(group: Group) -> None:
    """The extended attributes of every array directory and its data file in the group."""
    wrong = []
    for writer, case in IN_GROUP:
        spec, root = SPECS[case], group.mount.path / writer / case
        for name, value in _expected_xattrs(spec, group.store / writer / case).items():
            for path in (root, root / "data"):
                raw = os.getxattr(path, name).decode()
                seen = raw if name in ("user.zarr.shape", "user.zarr.chunks") or (
                    name == "user.zarr.dtype" and not spec.np_dtype.names) else json.loads(raw)
                if seen != value:
                    wrong.append(f"{writer}/{case}{'/data' if path != root else ''} {name}: "
                                 f"{raw!r}, expected {value!r}")
    assert not wrong, "\n".join(wrong)


def test_consolidated_group(scratch: Path, mount_array: Any) -> None:
    """A group with `.zmetadata` (zarr-python's consolidate_metadata): still the stored bytes of
    every metadata file (the stored .zarray files are indented, .zmetadata holds them compact)."""
    store = scratch / "group"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.open_group(str(store), mode="w", zarr_format=2, attributes={"consolidated": True})
        zarr.open_group(str(store / "sub"), mode="w", zarr_format=2)
    arrays = {"struct-base64-zlib": "struct", "S6-short-base64": "s6",
              "i4-be-rank3-blosc-F-slash": "rank3", "f8-be-nan-blosc-slash": "sub/ts"}
    written = {}
    for case, name in arrays.items():
        if name.startswith("sub/"):
            write_tensorstore(SPECS[case], str(store / name), zarray_for(SPECS[case]))
            written[name] = tensorstore_oracle(SPECS[case], store / name)
        else:
            written[name] = write_zarr_python(SPECS[case], str(store / name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(store))
    assert json.loads((store / ".zmetadata").read_bytes())["metadata"]["s6/.zarray"]
    mount = mount_array(store, options=("ro",))
    views = ["data.h5", "data.nc"]
    names = [".zattrs", ".zgroup", ".zmetadata", *views, "rank3", "s6", "struct", "sub"]
    assert sorted(os.listdir(mount.path)) == sorted(names)
    assert sorted(os.listdir(mount.path / "sub")) == sorted([*os.listdir(store / "sub"), *views])
    for name in (".zattrs", ".zgroup", ".zmetadata", "sub/.zgroup"):
        assert (mount.path / name).read_bytes() == (store / name).read_bytes(), name
    for case, name in arrays.items():
        check_array(SPECS[case], store / name, mount.path / name, written[name])

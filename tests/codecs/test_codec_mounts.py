"""One real mount per codec of the registry and of zarrs (zarrfs.codecs): arrays zarrs wrote
(tests/data/zarrs) read through `data` as their `bytes` twin reads, and the twin's values
written through `data` stored exactly as zarrs stored them (gdeflate: read back the same);
the codecs zarrs' corpus has no array of here (lossy zfp, cast_value, scale_offset) written
and read back, the lossy ones against numcodecs' own result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr

from tests.helpers.mounting import MountFactory

ZARRS = Path(__file__).parents[1] / "data" / "zarrs"
CORPUS = sorted(p.name for p in ZARRS.iterdir() if p.is_dir() and not p.name.endswith("-bytes"))


def _chunks(array: Path) -> dict[str, bytes]:
    return {str(p.relative_to(array)): p.read_bytes() for p in (array / "c").rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", CORPUS)
def test_zarrs_array_reads_as_its_twin_and_writes_as_zarrs(name: str, mount_array: MountFactory,
                                                            tmp_path: Path) -> None:
    twin = mount_array(ZARRS / f"{name.split('-')[0]}-bytes", ["ro"]).data.read_bytes()
    assert mount_array(ZARRS / name, ["ro"]).data.read_bytes() == twin

    copy = tmp_path / name
    copy.mkdir()
    shutil.copy(ZARRS / name / "zarr.json", copy / "zarr.json")  # no chunks: all written anew
    mount = mount_array(copy)
    with open(mount.data, "r+b") as f:
        f.write(twin)
    assert mount.unmount() == 0
    if name.endswith("gdeflate"):  # zlib finds other matches than libdeflate: other bytes
        assert _chunks(copy).keys() == _chunks(ZARRS / name).keys()
        assert mount_array(copy, ["ro"]).data.read_bytes() == twin
    else:
        assert _chunks(copy) == _chunks(ZARRS / name)


def _document(dtype: str, fill: Any, codecs: list[Any]) -> dict[str, Any]:
    return {"zarr_format": 3, "node_type": "array", "shape": [12, 20], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [6, 10]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": fill, "codecs": codecs}


BYTES = {"name": "bytes", "configuration": {"endian": "little"}}
VALUES = np.cumsum(np.random.default_rng(3).normal(size=(12, 20)), axis=1)
ZFP = [({"mode": "fixed_rate", "rate": 12}, None),  # 2-d: no zfpy rate gives zarrs' bits; self-checked
       ({"mode": "fixed_precision", "precision": 16}, {"mode": 3, "precision": 16}),
       ({"mode": "fixed_accuracy", "tolerance": 0.001}, {"mode": 4, "tolerance": 0.001})]


@pytest.mark.parametrize(("config", "reference"), ZFP, ids=lambda c: c and str(c["mode"]))
def test_zfp_lossy_modes_through_a_mount(config: dict[str, Any], reference: dict[str, Any] | None,
                                         mount_array: MountFactory, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    doc = _document("float64", 0.0, [{"name": "zfp", "configuration": config}])
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    mount = mount_array(tmp_path / "a")
    with open(mount.data, "r+b") as f:
        f.write(VALUES.tobytes())
    assert mount.unmount() == 0
    read = np.frombuffer(mount_array(tmp_path / "a", ["ro"]).data.read_bytes(), np.float64).reshape(12, 20)
    assert np.abs(read - VALUES).max() < 0.01
    if reference is not None:
        codec = numcodecs.ZFPY(**reference)
        for i in range(2):
            for j in range(2):
                box = np.s_[6 * i : 6 * i + 6, 10 * j : 10 * j + 10]
                expected = codec.decode(codec.encode(np.ascontiguousarray(VALUES[box])))
                assert read[box].tobytes() == np.asarray(expected).tobytes()


def test_scale_offset_and_cast_value_through_a_mount(mount_array: MountFactory, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    nan_as_0 = {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}
    codecs = [{"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
              {"name": "cast_value", "configuration": {"data_type": "uint8", "scalar_map": nan_as_0}},
              BYTES]
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(_document("float64", "NaN", codecs)))
    values = np.round(np.abs(VALUES) * 100) * 10  # multiples of 10 from 0 to 2540: exact
    values = np.minimum(values, 2540)
    values[0, :3] = np.nan
    mount = mount_array(tmp_path / "a")
    with open(mount.data, "r+b") as f:
        f.write(values.tobytes())
    assert mount.unmount() == 0
    stored = np.frombuffer((tmp_path / "a" / "c" / "0" / "0").read_bytes(), np.uint8).reshape(6, 10)
    assert stored[0, :3].tolist() == [0, 0, 0]
    assert np.array_equal(stored[1:], (values[1:6, :10] + 10) / 10)
    read = np.frombuffer(mount_array(tmp_path / "a", ["ro"]).data.read_bytes(), np.float64).reshape(12, 20)
    assert np.array_equal(read, values, equal_nan=True)


def test_pcodec_written_through_a_mount_reads_in_zarr_python(mount_array: MountFactory,
                                                             tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    config = {"level": 8, "mode_spec": "auto", "delta_spec": "auto", "paging_spec": "equal_pages_up_to",
              "delta_encoding_order": None, "equal_pages_up_to": 262144}  # as zarr-python writes it
    codec = {"name": "numcodecs.pcodec", "configuration": config}
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(_document("float64", 0.0, [codec])))
    mount = mount_array(tmp_path / "a")
    with open(mount.data, "r+b") as f:
        f.write(VALUES.tobytes())
    assert mount.unmount() == 0
    with pytest.warns(UserWarning, match="Numcodecs codecs are not in the Zarr version 3 specification"):
        array = zarr.open_array(tmp_path / "a", mode="r")
    assert np.array_equal(array[...], VALUES)


def test_zarr_pythons_numcodecs_zfpy_reads_and_writes(mount_array: MountFactory, tmp_path: Path) -> None:
    """zarr-python 3's `numcodecs.zfpy` (zfp with its header): its array reads through a
    mount as zarr-python reads it, and values written through the mount read in zarr-python
    as numcodecs' ZFPY round trip gives them."""
    import zarr.codecs.numcodecs as nc

    with pytest.warns(UserWarning, match="Numcodecs codecs are not in the Zarr version 3"):
        serializer = nc.ZFPY(mode=4, tolerance=0.001)
    array = zarr.create_array(tmp_path / "a", shape=(12, 20), chunks=(6, 10), dtype="float64",
                              serializer=serializer, compressors=None, fill_value=0.0)
    array[...] = VALUES
    assert mount_array(tmp_path / "a", ["ro"]).data.read_bytes() == array[...].tobytes()

    mount = mount_array(tmp_path / "a")
    with open(mount.data, "r+b") as f:
        f.write((VALUES[::-1] * 2).copy().tobytes())
    assert mount.unmount() == 0
    reference = numcodecs.ZFPY(mode=4, tolerance=0.001)
    chunk = np.ascontiguousarray((VALUES[::-1] * 2)[:6, :10])
    with pytest.warns(UserWarning, match="Numcodecs codecs are not in the Zarr version 3"):
        read = zarr.open_array(tmp_path / "a", mode="r")[...]
    assert read[:6, :10].tobytes() == np.asarray(reference.decode(reference.encode(chunk))).tobytes()


# numcodecs.zfpy as zarrs reads it: numcodecs' own configuration (zarr-python 3.0 wrote it:
# every member, -1 where unused, and `compression_kwargs` repeating the mode's), and zarrs'
# reversible mode, which numcodecs decodes but cannot encode.
ZFPY_WRITTEN = {
    "fixed accuracy": {"mode": 4, "compression_kwargs": {"tolerance": 0.001}, "tolerance": 0.001, "rate": -1,
                       "precision": -1},
    "fixed rate": {"mode": 2, "compression_kwargs": {"rate": 16}, "tolerance": -1, "rate": 16,
                   "precision": -1},
    "fixed precision": {"mode": 3, "compression_kwargs": {"precision": 20}, "tolerance": -1, "rate": -1,
                        "precision": 20},
    "reversible": {"mode": 5},
}


def _zfpy_stored(config: dict[str, Any], chunk: np.ndarray) -> bytes:
    """A chunk as zarrs stores it: numcodecs' ZFPY's bytes (reversible: zfpy's, with no mode
    arguments, as zarrs writes them and numcodecs cannot)."""
    import zfpy

    if config["mode"] == 5:
        return bytes(zfpy.compress_numpy(chunk, write_header=True))
    return bytes(numcodecs.get_codec({"id": "zfpy", **config}).encode(chunk))


def _zfpy_array(path: Path, config: dict[str, Any], values: np.ndarray) -> np.ndarray:
    """`values` stored at `path` with `config`, chunk by chunk; what numcodecs decodes of them."""
    path.mkdir()
    codec = {"name": "numcodecs.zfpy", "configuration": config}
    (path / "zarr.json").write_text(json.dumps(_document("float64", 0.0, [codec])))
    decoded = np.empty_like(values)
    for i, j in np.ndindex(2, 2):
        window = np.s_[6 * i : 6 * i + 6, 10 * j : 10 * j + 10]
        stored = _zfpy_stored(config, np.ascontiguousarray(values[window]))
        (path / "c" / str(i)).mkdir(parents=True, exist_ok=True)
        (path / "c" / str(i) / str(j)).write_bytes(stored)
        decoded[window] = numcodecs.ZFPY().decode(stored)
    return decoded


@pytest.mark.parametrize("config", ZFPY_WRITTEN.values(), ids=ZFPY_WRITTEN.keys())
def test_numcodecs_zfpy_configurations_zarrs_reads(config: dict[str, Any], mount_array: MountFactory,
                                                  tmp_path: Path) -> None:
    """Read as numcodecs' decode reads them, and as zarr-python does; values written through
    the mount read in zarr-python as numcodecs' (zfpy's) round trip gives them."""
    expected = _zfpy_array(tmp_path / "a", config, VALUES)
    assert mount_array(tmp_path / "a", ["ro"]).data.read_bytes() == expected.tobytes()
    with pytest.warns(UserWarning, match="Numcodecs codecs are not in the Zarr version 3"):
        assert zarr.open_array(tmp_path / "a", mode="r")[...].tobytes() == expected.tobytes()

    mount = mount_array(tmp_path / "a")
    with open(mount.data, "r+b") as f:
        f.write((VALUES[::-1] * 2).copy().tobytes())
    assert mount.unmount() == 0
    round_trip = _zfpy_array(tmp_path / "b", config, VALUES[::-1] * 2)
    with pytest.warns(UserWarning, match="Numcodecs codecs are not in the Zarr version 3"):
        assert zarr.open_array(tmp_path / "a", mode="r")[...].tobytes() == round_trip.tobytes()
    if config["mode"] == 5:
        assert round_trip.tobytes() == (VALUES[::-1] * 2).tobytes()

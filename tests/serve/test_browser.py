"""A web viewer in a real browser: headless Chromium, on a page of another origin than the
server (a second HTTP server on 127.0.0.1), reads windows of `data.tif` with geotiff.js
(`GeoTIFF.fromUrl(...).getImage().readRasters({window})`, range requests from the page) from
`zarrfs serve --allow-origin` naming the page's origin, and gets zarr-python's values. The
same page from an origin not named cannot read it (the browser's fetch fails).

geotiff.js 3 (OpenLayers') and geotiff.js 2 (2.1.3, Viv's and so Avivator's) read it. The
tiles here (128 x 128 uint16, 32 KiB) would end on 64 KiB every other one, and geotiff.js 2's
block cache waits for ever on the block after a range that ends on one (geotiff.js issue 374,
fixed in 3.0): data.tif's layout keeps every tile off those ends (`layout.READER_BLOCK`), and
every IFD and table of its header (`directories`): geotiff.js 2 reads a file of 16 x 1021 tiles
whose TileOffsets (at byte 192, 65,344 bytes) ended on 64 KiB before."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.browser import CHROMIUM, GEOTIFF, page_server, posted_by_chromium
from tests.helpers.serving import served

SHAPE, CHUNKS = (300, 500), (128, 128)
WINDOWS = [[0, 0, 128, 128], [100, 50, 400, 250], [450, 280, 500, 300], [7, 123, 9, 300]]  # (x0, y0, x1, y1)

PAGE = """<!doctype html>
<script src="/geotiff.js"></script>
<script>
(async () => {
  const report = (found) => fetch('/result', {method: 'POST', body: JSON.stringify(found)});
  try {
    const image = await (await GeoTIFF.fromUrl(%(url)s)).getImage();
    const windows = [];
    for (const window of %(windows)s) {
      windows.push(Array.from((await image.readRasters({window}))[0]));
    }
    await report({width: image.getWidth(), height: image.getHeight(), windows});
  } catch (error) {
    await report({error: String(error), causes: (error.errors || []).map(String)});
  }
})();
</script>
"""

pytestmark = pytest.mark.skipif(CHROMIUM is None or not all(path.exists() for path in GEOTIFF.values()),
                                reason="needs Debian's chromium and geotiff.js (scripts/install)")
VERSIONS = ["3", "2"]


@pytest.fixture
def image(tmp_path: Path) -> Path:
    values = (np.arange(SHAPE[0] * SHAPE[1], dtype="u4") * 7919 % 65536).astype("u2").reshape(SHAPE)
    array = zarr.create_array(tmp_path / "image.zarr", shape=SHAPE, chunks=CHUNKS, dtype="u2", zarr_format=3)
    array[...] = values
    return tmp_path / "image.zarr"


def files(url: str, version: str, windows: list[list[int]] = WINDOWS) -> dict[str, tuple[str, bytes]]:
    page = PAGE % {"url": json.dumps(url), "windows": json.dumps(windows)}
    return {"/": ("text/html; charset=utf-8", page.encode()),
            "/geotiff.js": ("text/javascript", GEOTIFF[version].read_bytes())}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_page_of_a_named_origin_reads_windows_of_data_tif(image: Path, tmp_path: Path,
                                                             version: str) -> None:
    expected = np.asarray(zarr.open_array(image, mode="r")[...])
    with page_server({}) as page:
        named = ["--allow-origin", f"http://127.0.0.1:{page.port}"]
        with served(image, tmp_path, ["ro"], args=named) as server:
            page.files.update(files(server.url + "data.tif", version))
            found = posted_by_chromium(f"http://127.0.0.1:{page.port}/", page, tmp_path / "chromium.log")
            assert "error" not in found, found
            assert (found["height"], found["width"]) == SHAPE
            for (x0, y0, x1, y1), values in zip(WINDOWS, found["windows"], strict=True):
                assert values == expected[y0:y1, x0:x1].ravel().tolist(), (x0, y0, x1, y1)
            assert "Traceback" not in server.log()


LARGE_TABLE, TABLE_WINDOWS = (256, 16336), [[0, 0, 40, 20], [16300, 230, 16336, 256], [8000, 100, 8050, 120]]


def test_geotiff_2_reads_a_file_whose_tile_table_would_end_on_a_block(tmp_path: Path) -> None:
    """16 x 1021 tiles of 16 x 16 (of a fill value but two): TileOffsets from byte 192 would end
    at 64 KiB, a range geotiff.js 2 read and waited on for ever (`directories`)."""
    array = zarr.create_array(tmp_path / "table.zarr", shape=LARGE_TABLE, chunks=(16, 16), dtype="u1",
                              fill_value=5, zarr_format=3)
    array[:16, :32] = np.arange(512).reshape(16, 32) % 251
    array[240:, 16320:] = 200
    expected = np.asarray(array[...])
    with page_server({}) as page:
        named = ["--allow-origin", f"http://127.0.0.1:{page.port}"]
        with served(tmp_path / "table.zarr", tmp_path, ["ro"], args=named) as server:
            page.files.update(files(server.url + "data.tif", "2", TABLE_WINDOWS))
            found = posted_by_chromium(f"http://127.0.0.1:{page.port}/", page, tmp_path / "chromium.log")
            assert "error" not in found, found
            assert (found["height"], found["width"]) == LARGE_TABLE
            for (x0, y0, x1, y1), values in zip(TABLE_WINDOWS, found["windows"], strict=True):
                assert values == expected[y0:y1, x0:x1].ravel().tolist(), (x0, y0, x1, y1)


def test_a_page_of_an_origin_not_named_cannot_read(image: Path, tmp_path: Path) -> None:
    """The page is the same; its origin is http://localhost:PORT, the server names only
    http://127.0.0.1:PORT."""
    with page_server({}) as page:
        named = ["--allow-origin", f"http://127.0.0.1:{page.port}"]
        with served(image, tmp_path, ["ro"], args=named) as server:
            page.files.update(files(server.url + "data.tif", "3"))
            found = posted_by_chromium(f"http://localhost:{page.port}/", page, tmp_path / "chromium.log")
            assert "windows" not in found, found
            assert "failed to fetch" in " ".join([found["error"], *found["causes"]]).lower(), found

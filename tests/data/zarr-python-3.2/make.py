"""How the arrays beside this script were made, by zarr-python 3.2 (its `rectilinear` chunk
grid; zarr-python 3.1, the version the tests install, cannot open them). Run by hand, in a
virtualenv holding zarr>=3.2, from this directory: `python make.py`. Each array `NAME.zarr`
comes with `NAME.npy` (`strings.json`), what zarr-python 3.2 reads back from it."""

import json
import shutil

import numpy as np
import zarr

zarr.config.set({"array.rectilinear_chunks": True})
values = (np.arange(12 * 10, dtype="uint16") * 7).reshape(12, 10)
made = {
    # explicit edges and an integer axis; rows 8.. never written: their chunks are not stored
    # (then resized by zarr-python to 11 rows: the edges stay, past the end)
    "plain": (dict(shape=(12, 10), chunks=[[3, 5, 4], 4], dtype="uint16", fill_value=9), np.s_[0:8]),
    # shards with their own shapes (run-length encoded), inner chunks (2, 5) regular
    "sharded": (dict(shape=(12, 10), chunks=(2, 5), shards=[[4, 4, 2, 2], [10]], dtype="uint16",
                     fill_value=9), np.s_[2:10, 6:]),
}
for name, (options, region) in made.items():
    shutil.rmtree(f"{name}.zarr", ignore_errors=True)
    array = zarr.create_array(f"{name}.zarr", **options)
    array[region] = values[region]
    if name == "plain":
        array.resize((11, 10))
    np.save(f"{name}.npy", np.asarray(zarr.open_array(f"{name}.zarr", mode="r")[...]))
shutil.rmtree("strings.zarr", ignore_errors=True)
strings = zarr.create_array("strings.zarr", shape=(6,), chunks=[[1, 2, 3]], dtype=str, fill_value="-")
strings[0:3] = np.array(["é", "two\nlines", ""], dtype=object)
with open("strings.json", "w") as f:
    json.dump(list(zarr.open_array("strings.zarr", mode="r")[...]), f, ensure_ascii=False)

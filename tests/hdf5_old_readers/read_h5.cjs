// Every dataset of an HDF5 file as jsfive (pure JavaScript) reads it, as JSON, in the form of
// read_h5.py's output (tests/helpers/old_hdf5_readers.py compares both alike):
//
//   node read_h5.cjs JSFIVE_DIR FILE OUT.json
//
// JSFIVE_DIR: where scripts/install put jsfive (${XDG_CACHE_HOME:-$HOME/.cache}/zarrfs/jsfive).
// jsfive reads the whole file into memory, as its users do. Where jsfive leaves an element
// undefined (jsfive 0.4.2 does not fill the chunks an index does not hold, nor a dataset
// with no storage at all), the element is the dataset's fill value as jsfive reads it from
// the file, and `missing_elements` counts them. jsfive's numbers are JavaScript's: a 64-bit
// integer past 2^53 comes back rounded to a double.
"use strict";

const fs = require("fs");
const path = require("path");

function plain(value) {
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "NaN";
    if (value === Infinity) return "Infinity";
    if (value === -Infinity) return "-Infinity";
    return value;
  }
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string" || typeof value === "boolean" || value === null) return value;
  if (value === undefined) return null;
  if (value instanceof ArrayBuffer) return { bytes: Buffer.from(value).toString("hex") };
  if (ArrayBuffer.isView(value)) {
    return { bytes: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex") };
  }
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [k, plain(v)]));
  if (typeof value === "object") return { repr: String(value) };
  return { repr: String(value) };
}

function failure(error) {
  return { error: String(error) };  // (jsfive throws strings as well as Errors)
}

function describe(hdf5, dataset) {
  const found = { shape: dataset.shape, dtype: dataset.dtype, chunks: null, values: null, types: [],
                  missing_elements: 0, error: null };
  let fill;
  try {
    fill = dataset.fillvalue;
    found.fillvalue = plain(fill);
  } catch (error) {
    found.fillvalue = failure(error);
  }
  try {
    const attrs = dataset.attrs;
    found.attrs = Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, plain(v)]));
  } catch (error) {
    found.attrs = failure(error);  // (jsfive reads a dataset's attributes all at once)
  }
  try {
    found.chunks = dataset._dataobjects.chunks || null;
  } catch (error) {
    found.chunks = null;
  }
  let values;
  try {
    values = dataset.value;
  } catch (error) {
    found.error = String(error);
    return found;
  }
  const size = dataset.shape.reduce((a, b) => a * b, 1);
  const out = new Array(size);
  const types = new Set();
  for (let i = 0; i < size; i++) {
    let value = values[i];
    if (value === undefined) {
      found.missing_elements += 1;
      value = fill;
    }
    types.add(typeof value);
    out[i] = plain(value);
  }
  found.values = out;
  found.types = [...types].sort();
  return found;
}

function walk(hdf5, group, prefix, datasets) {
  for (const key of [...group.keys].sort()) {
    const name = prefix + key;
    let item;
    try {
      item = group.get(key);
    } catch (error) {
      datasets[name] = { shape: null, error: String(error) };  // (an object jsfive could not open)
      continue;
    }
    if (item instanceof hdf5.Dataset) {
      datasets[name] = describe(hdf5, item);
    } else {
      walk(hdf5, item, name + "/", datasets);
    }
  }
}

function main() {
  const [jsfiveDir, file, outPath] = process.argv.slice(2);
  const hdf5 = require(path.join(jsfiveDir, "node_modules", "jsfive"));
  const version = require(path.join(jsfiveDir, "node_modules", "jsfive", "package.json")).version;
  const bytes = fs.readFileSync(file);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const opened = new hdf5.File(buffer, path.basename(file));
  const datasets = {};
  walk(hdf5, opened, "", datasets);
  fs.writeFileSync(outPath, JSON.stringify({ reader: `jsfive ${version} (node ${process.version})`, datasets }));
}

main();

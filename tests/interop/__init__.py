"""Interop tests: zarrfs against TensorStore and zarr-python."""

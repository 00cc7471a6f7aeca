"""`zarrfs.mount`'s keyword options, each written as its option's declaration says
(`zarrfs.api.options_text`): what reaches the daemon is what the keyword said, a False
included, checked by parsing the text as the daemon does and, for `push_pages=False`, by a
real mount's own `bytes_pushed` counter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import zarrfs
from tests.helpers.mounting import mount_stats
from zarrfs.api import options_text
from zarrfs.declared import Option
from zarrfs.options import CACHE, DECLARED, PUSH_PAGES, THREADS, UMASK, MountOptions, OptionError
from zarrfs.store.objects.options import ANON
from zarrfs.store.references import FO
from zarrfs.store.settings import TIMEOUT

SHAPE, CHUNKS = (4096, 4096), (512, 512)  # uint16: 32 MiB, slabs of two rows of chunks (8 MiB)


def given(keywords: dict[str, Any]) -> MountOptions:
    """The options the daemon parses from the `-o` text `zarrfs.mount` makes of `keywords`."""
    return MountOptions.parse([options_text(keywords)])


@pytest.mark.fast
@pytest.mark.parametrize(("keywords", "read", "value"), [
    ({"push_pages": False}, lambda o: o.push_pages, False),  # (main dropped it: pages pushed)
    ({"push_pages": True}, lambda o: o.push_pages, True),
    ({"fill_missing_data_reads": False}, lambda o: o.fill_missing_data_reads, False),
    ({"direct_io": True}, lambda o: o.direct_io, True),
    ({"direct_io": False}, lambda o: o.direct_io, False),
    ({"ro": False}, lambda o: o.access, "rw"),
    ({"rw": False}, lambda o: o.access, "ro"),
    ({"anon": True}, lambda o: o.given[ANON], True),
    ({"threads": 3}, lambda o: o.threads, 3),
    ({"umask": 0o027}, lambda o: o.umask, 0o027),
    ({"cache": 64 << 20}, lambda o: o.cache_bytes, 64 << 20),
    ({"cache": "1G"}, lambda o: o.cache_bytes, 1 << 30),
    ({"timeout": 2.5}, lambda o: o.given[TIMEOUT], 2.5),
    ({"fo": "refs.json"}, lambda o: o.given[FO], "refs.json"),
    ({"new_codec": "gzip"}, lambda o: o.new_codec, "gzip"),
    ({"new_chunks": (64, 32)}, lambda o: o.new_chunks, (64, 32)),
    ({"log": Path("/var/log/z.log")}, lambda o: o.log_file, "/var/log/z.log"),
])
def test_each_kind_of_keyword_reaches_the_daemon_as_given(keywords: dict[str, Any], read: Any,
                                                          value: Any) -> None:
    assert read(given(keywords)) == value


@pytest.mark.fast
@pytest.mark.parametrize("option", [o for o in DECLARED if o.type == "boolean"], ids=lambda o: o.name)
def test_every_true_or_false_option_takes_both(option: Option[bool]) -> None:
    """Whatever the default: the keyword's value, never the default in its place."""
    for value in (True, False):
        assert given({option.name: value}).given[option] is value


@pytest.mark.fast
@pytest.mark.parametrize("option", [o for o in DECLARED if o.type == "flag"], ids=lambda o: o.name)
def test_every_flag_is_given_by_true_and_left_out_by_false(option: Option[bool]) -> None:
    assert given({option.name: True}).given[option] is True
    assert options_text({option.name: False}) == ""


@pytest.mark.fast
@pytest.mark.parametrize("keywords", [{"cache": True}, {"threads": False}, {"timeout": True},
                                      {"umask": False}])
def test_true_or_false_for_a_valued_option_is_refused(keywords: dict[str, Any]) -> None:
    with pytest.raises(OptionError, match="takes"):
        options_text(keywords)


@pytest.mark.fast
def test_the_kinds_tested_are_the_declared_ones() -> None:
    """(the declarations these tests lean on: a change of kind would leave them testing nothing)"""
    assert (PUSH_PAGES.type, PUSH_PAGES.default) == ("boolean", True)
    assert (THREADS.type, UMASK.type, CACHE.type, TIMEOUT.type) == ("integer", "octal", "size", "seconds")


def test_push_pages_false_pushes_no_page(tmp_path: Path) -> None:
    """`zarrfs.mount(..., push_pages=False)`: a whole sequential read of `data` leaves the
    mount's `bytes_pushed` at 0; the same read of a mount with the default pushes (the
    control), and both read the array's bytes."""
    path = tmp_path / "a.zarr"
    values = (np.arange(SHAPE[0] * SHAPE[1], dtype="uint32") % 4093).astype("uint16").reshape(SHAPE)
    zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype="uint16", fill_value=0)[...] = values
    for push_pages, pushed in ((False, lambda n: n == 0), (None, lambda n: n > 0)):
        with zarrfs.mount(path, ro=True, push_pages=push_pages) as mount:
            assert _read_in_order(mount.path / "data") == values.tobytes()
            counted = mount_stats(mount.path)["bytes_pushed"]
            assert pushed(counted), (push_pages, counted)


def _read_in_order(path: Path, step: int = 1 << 20) -> bytes:
    with open(path, "rb", buffering=0) as f:
        return b"".join(iter(lambda: f.read(step), b""))

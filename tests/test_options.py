"""The mount's `-o` options, composed from the declarations of the mount, the view families
and the store families: each reads as it did when `MountOptions` was one flat record (the
values and the errors), each family's option reaches the family unnamed on the way, and the
options a tree is served with (`TreeOptions`) are apart from the kernel's (`MountOptions`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from zarrfs.declared import OptionValues
from zarrfs.options import DECLARED, OWN, MountOptions, OptionError, TreeOptions
from zarrfs.store.disk_cache import DISK_CACHE, DISK_CACHE_SIZE
from zarrfs.store.icechunk import COMMIT, REF
from zarrfs.store.references import FO
from zarrfs.store.settings import TIMEOUT, SourceOptions
from zarrfs.store.sources import storage_options
from zarrfs.store.targets import REFERENCES_ALLOW
from zarrfs.views.array_dir import ViewSettings
from zarrfs.views.netcdf import CDF5
from zarrfs.views.plugins import PLUGIN_FILTERS
from zarrfs.views.registry import VIEW_KINDS
from zarrfs.views.tiff import STRIPS

pytestmark = pytest.mark.fast


def parsed(*groups: str) -> MountOptions:
    return MountOptions.parse(groups)


def _shape(settings: ViewSettings) -> tuple[str, bool, Any]:
    """What the views are made with: their byte order, order, and kinds."""
    return settings.byteorder, settings.fortran, settings.views


def timeouts(options: MountOptions) -> tuple[float | None, float | None]:
    """The bounds on one operation of a remote store and of a local one."""
    return options.source.timeout_for(remote=True), options.source.timeout_for(remote=False)


# (-o text, what reads it, the value it reads)
READ: list[tuple[str, Any, Any]] = [
    ("", lambda o: (o.read_only, o.read_write), (False, False)),
    ("ro", lambda o: (o.read_only, o.read_write), (True, False)),
    ("rw", lambda o: (o.read_only, o.read_write), (False, True)),
    ("rw,ro", lambda o: (o.read_only, o.read_write), (True, False)),
    ("ro,rw", lambda o: (o.read_only, o.read_write), (False, True)),
    ("allow_other", lambda o: o.fuse_options("f") >= {"allow_other", "default_permissions"}, True),
    ("uid=7,gid=8,umask=027", lambda o: (o.file_uid, o.file_gid, o.umask), (7, 8, 0o027)),
    ("cache=1.5GiB", lambda o: o.cache_bytes, 3 << 29),
    ("cache=4096", lambda o: o.cache_bytes, 4096),
    ("readahead=0,threads=3", lambda o: (o.readahead_kb, o.threads), (0, 3)),
    ("debug,direct_io,log=/tmp/l", lambda o: (o.debug, o.direct_io, o.log_file), (True, True, "/tmp/l")),
    ("push_pages=no", lambda o: o.push_pages, False),
    ("recheck=never", lambda o: o.recheck, None),
    ("recheck=open", lambda o: o.recheck, 0.0),
    ("recheck=2.5", lambda o: o.recheck, 2.5),
    ("new_codec=gzip:6,new_chunks=64:32", lambda o: (o.new_codec, o.new_chunks), ("gzip:6", (64, 32))),
    ("metrics=[::1]:9100", lambda o: o.metrics, ("::1", 9100)),
    ("fill_missing_data_reads=FALSE,store_data_equal_to_fill_value=1",
     lambda o: (o.fill_missing_data_reads, o.store_data_equal_to_fill_value), (False, True)),
    ("user=nobody,group=nogroup", lambda o: (o.user, o.group), ("nobody", "nogroup")),
    ("noatime,nodev,noatime", lambda o: o.kernel_options, frozenset({"noatime", "nodev"})),
    ("defaults,noauto,user,x-systemd.automount,comment,_netdev", lambda o: o, MountOptions()),
    # the views' options, as the array directory and each family read them
    ("", lambda o: _shape(o.view_settings), ("little", False, VIEW_KINDS)),
    ("endian=big,order=F,views=npy:nrrd", lambda o: _shape(o.view_settings), ("big", True, {"npy", "nrrd"})),
    ("views=none", lambda o: o.view_settings.views, frozenset()),
    ("", lambda o: [o.view_settings.form.options[x] for x in (STRIPS, PLUGIN_FILTERS, CDF5)], [False] * 3),
    ("tiff=strips,filters=plugins,nc_format=cdf5",
     lambda o: [o.view_settings.form.options[x] for x in (STRIPS, PLUGIN_FILTERS, CDF5)], [True] * 3),
    # the store's options, as the store opens the source
    ("", lambda o: (o.source, storage_options(o.source)), (SourceOptions(), {})),
    ("timeout=5,ref=v1,commit=each,fo=r.json,references_allow=/data:s3://other/x",
     lambda o: o.source, SourceOptions(OptionValues({TIMEOUT: 5.0, REF: "v1", FO: "r.json",
                                                      REFERENCES_ALLOW: ("/data", "s3://other/x"),
                                                      COMMIT: 0.0}))),
    ("commit=2", lambda o: o.source.given[COMMIT], 2.0),
    ("", lambda o: [o.source.given[x] for x in (TIMEOUT, REF, FO, REFERENCES_ALLOW, COMMIT)],
     [None, None, None, (), 0.0]),
    ("", timeouts, (30.0, None)),
    ("timeout=5", timeouts, (5.0, None)),
    ("endpoint_url=http://h:9,anon,profile=p,region=r,account_name=a", lambda o: storage_options(o.source),
     {"client_kwargs": {"endpoint_url": "http://h:9"}, "anon": True, "profile": "p", "region": "r",
      "account_name": "a"}),
    ("anon=no", lambda o: storage_options(o.source), {"anon": False}),
    ("disk_cache=/c,disk_cache_size=8M", lambda o: (o.given[DISK_CACHE], o.given[DISK_CACHE_SIZE]),
     ("/c", 8 << 20)),
    ("", lambda o: (o.given[DISK_CACHE], o.given[DISK_CACHE_SIZE]), (None, 1 << 30)),
]


@pytest.mark.parametrize(("text", "read", "value"), READ)
def test_each_option_reads_as_before(text: str, read: Any, value: Any) -> None:
    assert read(parsed(text)) == value


BAD_VALUES = ["uid=-1", "threads=0", "umask=9", "cache=lots", "endian=middle", "order=c", "views=npy:bogus",
              "tiff=tile", "filters=all", "nc_format=cdf2", "recheck=0", "timeout=1e7", "commit=0", "ref=",
              "references_allow=a::b", "new_codec=lzma", "metrics=:80", "push_pages=maybe"]


@pytest.mark.parametrize(("text", "message"), [
    ("bogus", "unknown option 'bogus'"), ("bogus=1", "unknown option 'bogus'"),
    ("ro=1", "unknown option 'ro'"), ("debug=yes", "unknown option 'debug'"),
    ("cache", "unknown option 'cache'"), ("nodev=1", "unknown option 'nodev'"),
    ("group", "unknown option 'group'"), ("defaults=1", "unknown option 'defaults'"),
    *((text, "option {}={!r}: bad value".format(*text.split("=", 1))) for text in BAD_VALUES),
    ("group=g", "group= needs user="), ("key=k", "credentials are read from the environment"),
    ("ro,aws_secret_access_key=x", "credentials are read from the environment"),
])
def test_bad_options_fail_as_before(text: str, message: str) -> None:
    with pytest.raises(OptionError) as raised:
        parsed(text)
    assert message in str(raised.value)


def test_later_options_win_across_groups() -> None:
    assert parsed("cache=1G,tiff=strips", "cache=2G", "tiff=tiles") == parsed("cache=2G")
    assert parsed("tiff=strips") != parsed("tiff=tiles")


def test_a_family_option_reaches_the_family_unnamed_on_the_way() -> None:
    """The layout the daemon hands the tree, and the form the array directory hands each
    family, carry the options as given: only the family that declared one reads it."""
    options = parsed("tiff=strips")
    assert options.view_settings == ViewSettings(options.given)
    chosen = options.view_settings.form.options
    assert chosen[STRIPS] and not chosen[PLUGIN_FILTERS]


def test_every_option_is_declared_once_with_its_help() -> None:
    names = [option.name for option in DECLARED]
    assert len(names) == len(set(names))
    assert {"tiff", "filters", "nc_format", "views", "timeout", "disk_cache", "ro"} <= set(names)
    for option in DECLARED:
        assert option.help and "\n" not in option.help, option.name
        assert option.forms, option.name


def test_the_tree_options_are_the_servers_and_the_kernels_the_mounts_alone() -> None:
    """`TreeOptions` (a mount's and a server's) holds the mount's own options `zarrfs serve`
    takes; `MountOptions` adds those only a mount takes (the kernel's, FUSE's); together they
    are every own option, each once, the help's order aside."""
    tree = [f.metadata["option"] for f in fields(TreeOptions) if "option" in f.metadata]
    mount = [f.metadata["option"] for f in fields(MountOptions) if "option" in f.metadata]
    assert tree and not any(option.mount_only for option in tree)
    assert mount[:len(tree)] == tree and all(option.mount_only for option in mount[len(tree):])
    assert sorted(o.name for o in mount) == sorted(o.name for o in OWN) and len(OWN) == len(set(OWN))
    served = TreeOptions.parse(["ro,cache=1G,allow_other,push_pages=false"])  # (the kernel's: ignored)
    assert (served.read_only, served.cache_bytes) == (True, 1 << 30)
    assert not hasattr(served, "fuse_options") and not hasattr(served, "push_pages")

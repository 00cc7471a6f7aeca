"""Fixtures shared by the whole suite: mounting arrays for real, in a temporary directory;
the threads that decode streams; the fast tier (marker `fast`); skips fail under CI."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

import pytest

from tests.helpers.mounting import Mount, MountFactory, mounted
from zarrfs.array.reads import streaming
from zarrfs.array.stored import chunk_io


@pytest.fixture
def mount_array(tmp_path: Path) -> Iterator[MountFactory]:
    """mount_array(source, options=(), **kwargs) -> Mount; unmounted at the end of the test,
    whether it passed or failed."""
    with ExitStack() as stack:
        count = 0

        def mount(source: str | Path, options: Sequence[str] = (), **kwargs: object) -> Mount:
            nonlocal count
            count += 1
            return stack.enter_context(
                mounted(source, tmp_path / f"mnt{count}", options, **kwargs)  # type: ignore[arg-type]
            )

        yield mount


@pytest.fixture(params=["loaders", "small-chunk lane"])
def stream_threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Streams decoded by the loader threads, then by the one-thread lane for small chunks
    that decode cheaply (zarrfs.array.reads.streaming.SMALL_CHUNK_BYTES, chunk_io's measure)."""
    lane = request.param == "small-chunk lane"
    monkeypatch.setattr(streaming, "SMALL_CHUNK_BYTES", 1 << 40 if lane else 0)
    monkeypatch.setattr(chunk_io, "MEASURED_DECODES", 0)
    monkeypatch.setattr(chunk_io, "CHEAP_DECODE_SECONDS", 1e9)
    return str(request.param)


# -- the fast tier, and no skips under CI ---------------------------------------------------

TESTS = Path(__file__).resolve().parent

# `bash scripts/test --fast` (`pytest -m fast`): unit tests of every layer, whole modules, plus
# one real mount per main path, by test function name (every parametrization of it). Keep it
# under two minutes on two cores, all of scripts/test included.
FAST_MODULES = {
    "array/cache/test_keyed_locks.py",
    "array/cache/test_masks.py",
    "array/decoding/test_decoding_pool.py",
    "array/reads/test_readahead_cost.py",
    "array/reads/test_sharded_streams.py",
    "array/test_engine_properties.py",
    "array/test_loader_pool.py",
    "array/test_written_back_during_load.py",
    "array/test_written_reads.py",
    "array/writes/test_early_writes.py",
    "array/writes/test_make_room.py",
    "array/writes/test_writeback_memory.py",
    "cli/test_install_system.py",
    "cli/test_systemd.py",
    "codecs/test_registry_codecs.py",
    "codecs/test_zstd_codec.py",
    "daemon/test_memory.py",
    "docs/test_docs_options.py",
    "formats/test_format_registry.py",
    "fuse/test_late_replies.py",
    "fuse/test_statfs.py",
    "fuse/test_store_errors.py",
    "fuzz/test_findings.py",
    "fuzz/test_replay.py",
    "interop/test_native.py",
    "reliability/test_faulty_fs.py",
    "scripts/test_check_layers.py",
    "scripts/test_light_tests.py",
    "store/local/test_local_writes.py",
    "store/test_deadlines.py",
    "store/test_page_cache.py",
    "store/test_store_stats.py",
    "store/zipfiles/test_zip_index.py",
    "test_api.py",
    "test_array_metadata.py",
    "tree/test_tree.py",
    "views/fits/test_fits_header.py",
    "views/hdf5/test_hdf5_format.py",
    "views/headers/test_headers.py",
    "views/mrc/test_mrc_header.py",
    "views/nifti/test_nifti_header.py",
    "views/placement/test_placement.py",
    "views/test_readahead.py",
    "views/tiff/test_stored_tiles.py",
    "views/tiff/test_tiff_view.py",
}
FAST_TESTS = {
    "docs/test_docs.py": {
        "test_a_transcript_compares_output_and_status",
        "test_comments_above_fences_say_how_to_run_them",
        "test_every_example_runs_or_says_why_not",
    },
    "views/tiff/test_geo_pyramid.py": {
        "test_a_level_is_placed_by_its_entry_or_the_group",
        "test_the_layout_is_read_as_the_convention_says",
    },
    "interop/test_mount_matrix.py": {
        "test_reads_match_tensorstore",
        "test_writes_reach_tensorstore_and_zarr",
    },
    "views/hdf5/test_hdf5_mount.py": {
        "test_chunks_pass_through",
    },
    "views/tiff/test_tiff_readers.py": {
        "test_decoded_tiles_have_exact_counts_and_each_chunk_is_decoded_once",
    },
    "views/tiff/test_tiff_strips.py": {
        "test_a_strip_is_whole_rows_of_chunks_read_once",
    },
    "views/hdf5/test_hdf5_group.py": {
        "test_xarray_reads_the_group_as_open_zarr",
    },
    "views/hdf5/test_hdf5_strings.py": {
        "test_unicode_as_variable_length",
        "test_xarray_reads_strings_as_open_zarr",
    },
    "fuse/test_mount.py": {
        "test_chunk_files_hold_the_decoded_chunk",
        "test_dd_reads_bytes",
    },
    "store/test_store_cas.py": {
        "test_conditional_delete",
        "test_conditional_put",
        "test_local_cas_leaves_no_files_behind",
    },
    "tree/test_groups.py": {
        "test_nested_groups_with_sharded_arrays",
        "test_write_through_a_nested_group_mount",
    },
    "array/writes/test_resize.py": {
        "test_chunk_files_keep_their_size",
        "test_partial_rows_are_refused",
    },
    "views/headers/test_views_mount.py": {
        "test_fortran_order_chunk_files_and_data",
    },
    "store/local/test_store_links.py": {
        "test_a_chunk_linked_outside_is_refused_to_every_reader",
    },
    "daemon/test_user_option.py": {
        "test_group_alone_is_refused",
        "test_the_daemon_serves_as_the_user_it_names",
    },
    "array/test_recheck.py": {
        "test_a_change_noticed_through_one_file_shows_in_the_others",
    },
    "store/test_http.py": {
        "test_ome_zarr_plate_without_listings",
    },
    "store/zipfiles/test_zip.py": {
        "test_an_rfc9_ozx",
    },
    "store/icechunk/test_icechunk_writes.py": {
        "test_each_fsync_of_data_is_one_commit_naming_what_it_wrote",
        "test_rw_at_a_tag_is_refused_in_one_line",
    },
    "store/references/test_references.py": {
        "test_inline_chunks_base64_and_text",
        "test_references_outside_the_set_are_refused",
    },
    "store/icechunk/test_icechunk.py": {
        "test_a_group_mounts_with_its_plain_and_sharded_arrays",
    },
    "store/icechunk/test_icechunk_versions.py": {
        "test_every_version_shows_the_arrays_as_icechunk_reads_them",
    },
    "store/icechunk/test_icechunk_virtual.py": {
        "test_a_container_elsewhere_is_refused_at_once_until_allowed",
    },
    "cli/test_commands.py": {
        "test_create_refuses_bad_input_in_one_line",
        "test_info_describes_a_zarr_python_array",
    },
    "cli/test_check_import.py": {
        "test_check_finds_damage_inside_groups",
        "test_import_keeps_metadata_options",
    },
    "tree/test_workspace.py": {
        "test_rm_r_deletes_plain_and_sharded_arrays_and_group_trees",
        "test_setfattr_replaces_attributes_of_arrays_and_groups",
    },
    "views/headers/test_geo_views.py": {
        "test_xarray_grid_in_gdal",
    },
    "tree/test_workspace_npy.py": {
        "test_np_save_big_endian_fortran_and_rank_one",
    },
    "reliability/test_partition.py": {
        "test_a_partition_degrades_to_cached_data_and_bounded_eio",
    },
    "reliability/test_azure.py": {
        "test_anon_uses_no_credentials_whatever_the_environment_names",
        "test_store_compare_and_swap",
    },
    "daemon/test_metrics.py": {
        "test_a_bad_address_is_refused",
        "test_a_scrape_during_a_workload_shows_it",
        "test_public_source",
        "test_the_option_parses",
    },
    "test_rectilinear.py": {
        "test_bad_edges_are_refused_naming_the_member",
        "test_cells_of_covers_every_element_once",
        "test_registry_example_reads_and_writes",
        "test_the_registry_example_expands_as_it_says",
    },
    "views/text/test_text_view.py": {
        "test_render_escapes",
        "test_strings_one_per_line",
    },
    "interop/test_zarrs_corpus.py": {
        "test_bytes_twin_holds_its_chunk_files",
        "test_exactly_the_listed_arrays_fail",
        "test_reads_as_its_bytes_twin",
    },
    "views/netcdf/test_netcdf_view.py": {
        "test_a_variable_past_4_gib_makes_cdf5",
        "test_json_attributes_get_netcdf_types",
        "test_listing_and_sizing_data_nc_open_no_array",
        "test_names_netcdf_c_refuses",
        "test_netcdf_c_reads_the_header_and_data",
        "test_pieces_cover_reads_across_header_variables_and_padding",
        "test_xarray_reads_data_nc_as_open_zarr_reads_the_store",
    },
    "views/netcdf/test_netcdf_classic.py": {
        "test_64_bit_attributes_are_doubles_where_exact",
        "test_classic_types_of_cdf5_types",
        "test_doubles_hold_values_exactly_or_reading_them_is_an_error",
        "test_the_option_parses",
    },
    "views/fits/test_fits_view.py": {
        "test_large_arrays_read_in_order",
    },
    "views/netcdf/test_netcdf_readahead.py": {
        "test_a_write_to_an_array_shows_in_data_nc_read_ahead",
        "test_data_nc_read_in_order_is_answered_from_big_endian_slabs",
    },
}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m fast` alone, modules with no fast test are not even imported: importing them
    (TensorStore, xarray, moto, ... and pytest's assertion rewriting) only to deselect every
    test cost 1.5 s of CPU of the tier's collection."""
    if config.option.markexpr != "fast" or collection_path.suffix != ".py":
        return None
    if not (collection_path.name.startswith("test_") and collection_path.is_relative_to(TESTS)):
        return None
    module = collection_path.relative_to(TESTS).as_posix()
    return module not in FAST_MODULES and module not in FAST_TESTS


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else ""
        name = getattr(item, "originalname", item.name)
        if module in FAST_MODULES or name in FAST_TESTS.get(module, ()):
            item.add_marker(pytest.mark.fast)


# Under CI a skip is a failure: a missing /dev/fuse or a declared test dependency that did not
# install must not pass as a green run of fewer tests.
STRICT = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _fail_if_skipped(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_if_skipped(outcome.get_result())  # type: ignore[attr-defined]


def _fail_if_skipped(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not STRICT or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, which must run everything: {reason}"


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the run: adlfs closes each client at exit in a finalizer run with the event loop
    the client was made with, and a client zarr-python opened (asynchronous, no loop of its
    own) has none: each prints "RuntimeError: Loop is not running" after a run that passed.
    Those exits are dropped; any other error at exit is shown as before."""
    shown = sys.excepthook

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        frames = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(trace)]
        closing_client = str(error) == "Loop is not running" and any(
            name.endswith(os.path.join("fsspec", "asyn.py")) for name in frames)
        if not closing_client:
            shown(kind, error, trace)

    sys.excepthook = hook

"""The commands: `zarrfs` and `mount.zarrfs` (`command_line`), what each does (`commands`) and the
offline tools behind some (`check`, `importer`, `info`, `resize`). Kept light: `main` and
`mount_helper_main` import the command line when called, so `import zarrfs` does not."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `zarrfs` command (`zarrfs.cli.main`)."""
    from .command_line import main as run

    return run(argv)


def mount_helper_main(argv: Sequence[str] | None = None) -> int:
    """`mount.zarrfs`, as mount(8) calls it."""
    from .command_line import mount_helper_main as run

    return run(argv)

"""`zarrfs install-system`: what `scripts/install` does for a checkout, for a pip (or pipx)
installation: `mount.zarrfs` in /sbin, so that `mount -t zarrfs` and fstab lines of type
`zarrfs` work, and the systemd units, naming this installation's `zarrfs` by its absolute path
(the units of the repository's `systemd/` name /usr/local/bin/zarrfs, the link scripts/install
makes).

The units come with the package (`zarrfs/cli/systemd/`, links to the repository's `systemd/` in
a checkout, files in a wheel). `zarrfs@.service` goes to /etc/systemd/system, ready to be
enabled per mountpoint; the mount and automount units are examples, to be copied and edited
(their name is their mountpoint's), so they go to /usr/local/share/zarrfs/systemd, with
`Type=zarrfs` (mount.zarrfs, found in /sbin) in place of `Type=fuse.zarrfs`, which has
mount.fuse3 look for `zarrfs` on PATH, where a virtualenv's is not.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import ZarrfsError

UNITS = Path(__file__).resolve().parent / "systemd"
SERVICE = "zarrfs@.service"
EXAMPLES = ("mnt-zarr.mount", "mnt-zarr.automount")
SHIPPED_COMMAND = "/usr/local/bin/zarrfs"  # (what the shipped units name)
SERVICE_DIR = "etc/systemd/system"
EXAMPLE_DIR = "usr/local/share/zarrfs/systemd"


def installed_commands(argv0: str | None = None) -> tuple[Path, Path]:
    """This installation's console scripts `zarrfs` and `mount.zarrfs`, by absolute path: beside
    the running `zarrfs` (links resolved: pipx's ~/.local/bin/zarrfs, scripts/install's
    /usr/local/bin/zarrfs), else beside the interpreter."""
    places = []
    argv0 = sys.argv[0] if argv0 is None else argv0
    if Path(argv0).name == "zarrfs":
        places.append(Path(os.path.realpath(argv0)).parent)
    places.append(Path(sys.executable).parent)
    for place in places:
        zarrfs, helper = place / "zarrfs", place / "mount.zarrfs"
        if os.access(zarrfs, os.X_OK) and os.access(helper, os.X_OK):
            if any(c.isspace() for c in str(place)):
                raise ZarrfsError(f"{place} has white space in its path, which units cannot name")
            return zarrfs, helper
    raise ZarrfsError(f"no zarrfs and mount.zarrfs console scripts in {' or '.join(map(str, places))}")


def install_system(prefix: Path, argv0: str | None = None) -> list[str]:
    """Link PREFIX/sbin/mount.zarrfs and write the units below `prefix` ("/" for the machine);
    a line for each thing done."""
    zarrfs, helper = installed_commands(argv0)
    sbin = prefix / "sbin"
    sbin.mkdir(parents=True, exist_ok=True)
    link = sbin / "mount.zarrfs"
    _replace_with_link(link, helper)
    shown = f"{link} ({sbin.resolve()} on merged /usr)" if sbin.is_symlink() else str(link)
    done = [f"linked {shown} -> {helper}"]

    service = prefix / SERVICE_DIR / SERVICE
    _write(service, _unit_text(SERVICE).replace(SHIPPED_COMMAND, str(zarrfs)))
    done.append(f"wrote {service} (ExecStart={zarrfs} ...)")
    examples = prefix / EXAMPLE_DIR
    for name in EXAMPLES:
        text = _unit_text(name).replace("\nType=fuse.zarrfs\n", "\nType=zarrfs\n")
        _write(examples / name, text.replace(SHIPPED_COMMAND, str(zarrfs)))
    done.append(f"wrote {examples}/{{{','.join(EXAMPLES)}}} (examples: copy to /{SERVICE_DIR} and edit)")
    return done


def _unit_text(name: str) -> str:
    try:
        return (UNITS / name).read_text()
    except OSError as e:
        raise ZarrfsError(f"the unit {name} is missing from this installation ({e.strerror})") from None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_text(text)
    temporary.chmod(0o644)
    temporary.replace(path)


def _replace_with_link(link: Path, target: Path) -> None:
    temporary = link.with_name(f".{link.name}.new")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(target)
    temporary.replace(link)

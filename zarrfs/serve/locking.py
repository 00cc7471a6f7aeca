"""WebDAV locks over an array's files, which are one array's bytes: `data`, `data.npy` and the
other views, and the chunk files. A write lock on any of them, or on the array's directory,
keeps the others from being written by a request that does not submit its token (423), as
if the lock were on the whole array. Asked of WsgiDAV's lock manager (its public API), for
the array's directory and everything below it: no walk over the chunk files.

Also: the locks of a name that was never made (a LOCK of a new name whose PUT was refused
or cut) end with that PUT, so the name is free for the next client.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from wsgidav import util
from wsgidav.dav_error import HTTP_LOCKED, DAVError, DAVErrorCondition, PRECONDITION_CODE_LockConflict

from ..tree import CHUNK, DATA, HEADER, Ref
from .site import url_names


def covered_url(path: str, ref: Ref) -> tuple[str, str]:
    """The URL a write to the file at URL `path` is checked against, and the depth: its
    array's directory and all below it, for a file of an array; a directory and all below it
    (a DELETE of a group or an array: the locks are listed, not the tree); else the file alone."""
    if ref.is_dir:
        return path, "infinity"
    below = 1 + len(ref.parts) if ref.role == CHUNK else 1 if ref.role in (DATA, HEADER) else 0
    if not below:
        return path, "0"
    return "/" + "/".join([*url_names(path)[:-below], ""]), "infinity"


def check_unlocked(resource: Any, ref: Ref) -> None:
    """DAVError 423 if a lock covers the file of which the request did not submit the token
    (in its If header), as the lock manager's own check of one URL has it."""
    lock_manager = resource.provider.lock_manager
    if lock_manager is None:
        return
    environ = resource.environ
    util.parse_if_header_dict(environ)
    path, depth = covered_url(resource.path, ref)
    url = quote(resource.provider.share_path + path)
    # (the URL's own locks and its parents' of depth infinity; with "infinity", those below it too)
    covering = [*lock_manager.get_indirect_url_lock_list(url),
                *(lock_manager.get_url_lock_list(url, recursive=True) if depth == "infinity" else [])]
    held = set(environ["wsgidav.ifLockTokenList"])
    principal = environ["wsgidav.user_name"]
    conflicts = DAVErrorCondition(PRECONDITION_CODE_LockConflict)
    for lock in covering:
        if lock["token"] not in held or lock["principal"] != principal:
            conflicts.add_href(lock["root"])
    if conflicts.hrefs:
        raise DAVError(HTTP_LOCKED, err_condition=conflicts)


def release_locks(resource: Any) -> None:
    """The locks on the resource's URL, ended (a name that was never made)."""
    lock_manager = resource.provider.lock_manager
    if lock_manager is not None:
        lock_manager.remove_all_locks_from_url(resource.get_ref_url())

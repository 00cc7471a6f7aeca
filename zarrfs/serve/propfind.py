"""PROPFIND, streamed: the multistatus of a directory is sent a member at a time, so a listing
of `chunks/` of a million chunks costs what a mount's listing costs (each member's size) in
bounded memory, where WsgiDAV's own builds the whole document first. `Depth: infinity` (and
no Depth, which means it) is refused with 403 and the precondition RFC 4918 names for it.
The properties are WsgiDAV's (`get_properties`): the same for every member as it gives."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from wsgidav import util
from wsgidav.dav_error import (
    HTTP_BAD_REQUEST,
    HTTP_FORBIDDEN,
    HTTP_NOT_FOUND,
    DAVError,
    PRECONDITION_CODE_PropfindFiniteDepth,
)
from wsgidav.xml_tools import etree, make_multistatus_el

OPENING = b'<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">'
CLOSING = b"</D:multistatus>"


def propfind(provider: Any, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    depth = environ.setdefault("HTTP_DEPTH", "infinity")
    if depth == "infinity":
        raise DAVError(HTTP_FORBIDDEN, context_info="Depth: infinity is not served (ask with Depth: 1)",
                       err_condition=PRECONDITION_CODE_PropfindFiniteDepth)
    if depth not in ("0", "1"):
        raise DAVError(HTTP_BAD_REQUEST, context_info=f"invalid Depth: {depth!r}")
    resource = provider.get_resource_inst(environ["PATH_INFO"], environ)
    if resource is None:
        raise DAVError(HTTP_NOT_FOUND, context_info=environ["PATH_INFO"])
    mode, names = _asked(environ)
    start_response("207 Multi-Status", [("Content-Type", "application/xml; charset=utf-8"),
                                        ("Date", util.get_rfc1123_time())])
    return _responses(resource, depth == "1" and resource.is_collection, mode, names)


def _responses(resource: Any, with_members: bool, mode: str, names: list[str]) -> Iterator[bytes]:
    yield OPENING
    yield _response(resource, mode, names)
    if with_members:
        for member in resource.members():
            yield _response(member, mode, names)
    yield CLOSING


def _response(resource: Any, mode: str, names: list[str]) -> bytes:
    found = make_multistatus_el()
    properties = resource.get_properties(mode, name_list=names) if mode == "named" \
        else resource.get_properties(mode)
    util.add_property_response(found, resource.get_href(), properties)
    text: bytes = etree.tostring(found[0], encoding="utf-8")
    return text.split(b"\n", 1)[1] if text.startswith(b"<?xml") else text


def _asked(environ: dict[str, Any]) -> tuple[str, list[str]]:
    """What the request body asks: ("allprop" | "name" | "named", the names of "named")."""
    body = util.parse_xml_body(environ, allow_empty=True)
    if body is None:
        return "allprop", []  # (an empty body asks for all properties)
    if body.tag != "{DAV:}propfind":
        raise DAVError(HTTP_BAD_REQUEST, context_info="the body is not a DAV:propfind")
    modes = {"{DAV:}allprop": "allprop", "{DAV:}propname": "name", "{DAV:}name": "name",
             "{DAV:}prop": "named"}
    asked = [(modes[child.tag], child) for child in body if child.tag in modes]
    if len(asked) != 1:
        raise DAVError(HTTP_BAD_REQUEST, context_info="one of allprop, propname or prop is asked")
    mode, element = asked[0]
    return mode, [child.tag for child in element] if mode == "named" else []

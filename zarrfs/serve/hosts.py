"""The names the server answers to, against DNS rebinding: a web page whose own name an
attacker points at 127.0.0.1 would otherwise read (and with `-o rw`, write) the tree, since
the browser thinks it talks to the page's site. Its requests say that name in their Host
header; the server answers only Host headers naming a loopback address (127.0.0.0/8, ::1),
`localhost` or a name below `.localhost`, the `--listen` host, a name given with
`--allow-host`, or, on a wildcard address (0.0.0.0, ::), the address the connection arrived
on. A port in Host is not looked at.

A request with no Host header at all is let through when it is HTTP/1.0 (RFC 9112 asks
HTTP/1.1 requests for one): no browser sends such a request, and a page can only rebind
through a browser."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import ZarrfsError

WILDCARDS = ("0.0.0.0", "::")  # (listening on every address of the machine)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Hosts:
    """The names a server answers to (each as `canonical` spells it)."""

    names: frozenset[str] = frozenset(LOOPBACK_NAMES)
    wildcard: bool = False  # (the connection's own address is a name too)

    @classmethod
    def given(cls, listen: str, allowed: Iterable[str] = ()) -> Hosts:
        """Those of a server on `listen` (its host), with the `--allow-host` names."""
        names = {*LOOPBACK_NAMES, canonical(listen)[0]}
        for name in allowed:
            if not _is_name(name):
                raise ZarrfsError(f"--allow-host {name}: expected a host name or an IP address, without "
                                  "a port or a scheme")
            names.add(canonical(name)[0])
        return cls(frozenset(names), canonical(listen)[0] in WILDCARDS)

    def admit(self, host: str | None, local: str | None, protocol: str) -> bool:
        """Whether a request with this Host header (None: none), that came in on the local
        address `local`, in `protocol` (HTTP/1.1), is for this server."""
        if host is None:
            return protocol == "HTTP/1.0"
        name, loopback = canonical(host)
        if loopback or name in self.names:
            return True
        return self.wildcard and local is not None and name == canonical(local)[0]


@functools.lru_cache(maxsize=512)
def canonical(host: str) -> tuple[str, bool]:
    """A Host header's name, without its port, in lower case, an IP address spelled one way
    (an IPv4 address mapped into IPv6 as IPv4), and whether it names the loopback interface.
    (Cached: every request of a streaming read asks it of the same header.)"""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    name = name.rstrip(".")
    address = _ip(name)
    if address is None:
        return name, name == "localhost" or name.endswith(".localhost")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), address.is_loopback


def _is_name(text: str) -> bool:
    """Whether an --allow-host is a name or an address alone (an IPv6 one bracketed or not)."""
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if ":" in bare:
        return isinstance(_ip(bare), ipaddress.IPv6Address)
    return bool(bare) and not any(c in bare for c in "/@*?#%[] ")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None

"""Who may reach the server: it binds 127.0.0.1 unless told otherwise, and on any other address
it asks every request for credentials, basic auth or a token, over TLS (a certificate given);
without them it does not start, and says why (credentials over plain HTTP off loopback only
when `--allow-plain-http` says so, and the log warns). Credentials are read from files, never
from the command line (where `ps` shows them), as the mount reads a store's from its config
files. With them: the names the server answers to (`hosts`) and the web pages' origins it
answers CORS for (`origins`)."""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ZarrfsError
from .hosts import Hosts
from .origins import Origins

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
REALM = "zarrfs"


class AccessError(ZarrfsError):
    """The server would let in who does not belong (or its credentials cannot be read)."""


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT, HOST or :PORT -> (host, port)."""
    host, port = text, str(DEFAULT_PORT)
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") or port
    elif text.count(":") == 1:
        host, port = text.split(":")
    if not port.isdigit() or int(port) > 65535:
        raise AccessError(f"--listen {text}: the port is not a number from 0 to 65535")
    return host or DEFAULT_HOST, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # (a name: whatever it resolves to, it may be reached from outside)


@dataclass(frozen=True)
class Access:
    """The credentials the server asks for (none: every request comes in) and its TLS."""

    users: dict[str, str] = field(default_factory=dict)  # user -> password (basic auth)
    token: str | None = None
    certificate: str | None = None
    key: str | None = None
    hosts: Hosts = field(default_factory=Hosts)
    origins: Origins = field(default_factory=Origins)
    in_clear: bool = False  # (credentials over plain HTTP off loopback, as --allow-plain-http asked)

    @classmethod
    def given(cls, host: str, *, users_file: str | None = None, token_file: str | None = None,
              certificate: str | None = None, key: str | None = None, allow_hosts: Sequence[str] = (),
              allow_origins: Sequence[str] = (), allow_plain_http: bool = False) -> Access:
        """The access a server on `host` has; AccessError if it would let strangers in."""
        if (certificate is None) != (key is None):
            raise AccessError("TLS needs both --tls-cert and --tls-key")
        for path in (certificate, key):
            if path is not None and not os.access(path, os.R_OK):
                raise AccessError(f"cannot read {path}")
        users, token = _users(users_file) if users_file else {}, _token(token_file) if token_file else None
        in_clear = not is_loopback(host) and bool(users or token) and certificate is None
        if in_clear and not allow_plain_http:
            what = "basic auth's passwords" if users else "the token"
            raise AccessError(f"serving on {host} with credentials needs TLS (--tls-cert, --tls-key): over "
                              f"plain HTTP {what} would travel in the clear, for anyone on the way to read "
                              "and replay; --allow-plain-http serves plain HTTP anyway")
        access = cls(users, token, certificate, key, Hosts.given(host, allow_hosts),
                     Origins.given(allow_origins, credentials=bool(users or token)), in_clear)
        if is_loopback(host):
            return access
        if not access.users and access.token is None:
            raise AccessError(f"serving on {host} needs credentials: --users-file (basic auth) or "
                              "--token-file, with --tls-cert and --tls-key; without them only "
                              "127.0.0.1 is served")
        return access

    @property
    def open(self) -> bool:
        return not self.users and self.token is None

    def admits(self, authorization: str) -> bool:
        """Whether an Authorization header carries the credentials asked for: the token as a
        bearer token or as basic auth's password (clients that only say basic: Finder,
        Windows, davfs2), or a user's password."""
        if self.open:
            return True
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            return self.token is not None and hmac.compare_digest(value.strip().encode(), self.token.encode())
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if self.token is not None and hmac.compare_digest(password.encode(), self.token.encode()):
            return True
        known = self.users.get(user)
        return known is not None and hmac.compare_digest(password.encode(), known.encode())


def _users(path: str) -> dict[str, str]:
    """USER:PASSWORD a line (# comments)."""
    users = {}
    for number, line in enumerate(_read(path).splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            user, colon, password = line.partition(":")
            if not colon or not user or not password:
                raise AccessError(f"{path}:{number}: expected USER:PASSWORD")
            users[user] = password
    if not users:
        raise AccessError(f"{path}: no USER:PASSWORD line")
    return users


def _token(path: str) -> str:
    token = _read(path).strip()
    if len(token) < 16:
        raise AccessError(f"{path}: a token of at least 16 characters is needed")
    return token


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise AccessError(f"cannot read {path}: {e}") from None

"""HTTP(S) servers as read-only stores (`driver`)."""

from .driver import PROTOCOLS, HttpDriver

__all__ = ["PROTOCOLS", "HttpDriver"]

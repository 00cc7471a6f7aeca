"""`data.txt`: an array of strings or bytes as text, one element a line."""

from .file import TEXT_NAME, TextFile

__all__ = ["TEXT_NAME", "TextFile"]

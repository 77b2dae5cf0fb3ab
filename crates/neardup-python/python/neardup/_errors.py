"""Exceptions of ``neardup.FingerprintStore`` and ``neardup.DocumentStore``, defined in Python so that each can also be the
built-in exception callers already catch (``FileNotFoundError``, ``FileExistsError``,
``ValueError``)."""

from __future__ import annotations

__all__ = ["ForeignStoreError", "NotAStoreError", "StoreError", "StoreExistsError"]


class StoreError(Exception):
    """A data directory problem: the base of every exception about a Store's directory,
    raised as itself for I/O errors and damaged databases."""


class NotAStoreError(StoreError, FileNotFoundError):
    """No neardup store at the path (``Store.open`` on a missing directory, a file, or a
    directory without ``neardup.redb``)."""


class StoreExistsError(StoreError, FileExistsError):
    """``Store.create`` on a directory that already holds a store."""


class ForeignStoreError(StoreError, ValueError):
    """The store file is not a neardup store, or of a format this neardup does not read."""

"""A drop-in for seomoz simhash-py, on neardup's Rust core.

The same names and results as simhash-py: ``compute``, ``unsigned_hash``, ``shingle``,
``num_differing_bits``, ``find_all``, and the old ``Corpus``; and the legacy fingerprints
of old simhash-py and simhash-cpp before 2017: ``hash(text)``, ``hash_fp(values)``,
``legacy_cpp_fingerprint(data)`` and their parts ``jenkins64``, ``cyclic3`` and
``legacy_cpp_tokens`` (see each one's docstring). Fingerprints are ints in
0..2**64-1; functions that take many accept any iterable of ints or a numpy ``uint64``
array (read in one bulk copy, numpy not needed otherwise). An int outside 0..2**64-1
raises OverflowError.

Differences, on purpose:

- a bad layout (blocks not above the distance, above 64, or too many tables) raises
  ValueError where simhash-py aborted the interpreter;
- ``find_all(..., exact_duplicates=True)`` also reports each repeated value ``v`` as
  ``(v, v)``;
- ``shingle`` checks its window when called (simhash-py did on the first ``next``), takes
  any iterable, even a one-shot iterator, and ends cleanly on Python 3.7 and later;
- ``Corpus.find_all`` returns each match once; ``Corpus.find_first`` returns None when
  nothing matches (simhash-py returned 0, which is also a fingerprint).

Example::

    >>> from neardup import simhash
    >>> a = simhash.compute([simhash.unsigned_hash(b"".join(s)) for s in
    ...                      simhash.shingle([b"a", b"b", b"c", b"d", b"e"], 2)])
    >>> simhash.num_differing_bits(a, a ^ 0b101)
    2
    >>> simhash.find_all([a, a ^ 0b101, a ^ 0xFFFF], 4, 3) == [(min(a, a ^ 5), max(a, a ^ 5))]
    True
"""

from __future__ import annotations

import collections
import itertools
import operator
from typing import Iterable, Iterator, List, TypeVar

from neardup._neardup import (
    Corpus,
    compute,
    cyclic3,
    find_all,
    hash,
    hash_fp,
    jenkins64,
    legacy_cpp_fingerprint,
    legacy_cpp_tokens,
    num_differing_bits,
    unsigned_hash,
)

__all__ = [
    "Corpus",
    "compute",
    "cyclic3",
    "find_all",
    "hash",
    "hash_fp",
    "jenkins64",
    "legacy_cpp_fingerprint",
    "legacy_cpp_tokens",
    "num_differing_bits",
    "shingle",
    "unsigned_hash",
]

T = TypeVar("T")


def shingle(tokens: Iterable[T], window: int = 4) -> Iterator[List[T]]:
    """Every run of ``window`` consecutive tokens, in order, each as a new list.

    A generator over any iterable (a list, a string, a one-shot iterator); fewer tokens
    than ``window`` give nothing. A window of 0 or less raises
    ``ValueError("Window size must be positive")`` at the call.

    >>> list(shingle("abcde", 3))
    [['a', 'b', 'c'], ['b', 'c', 'd'], ['c', 'd', 'e']]
    """
    window = operator.index(window)
    if window <= 0:
        raise ValueError("Window size must be positive")
    return _windows(iter(tokens), window)


def _windows(tokens: Iterator[T], window: int) -> Iterator[List[T]]:
    run = collections.deque(itertools.islice(tokens, window - 1), maxlen=window)
    for token in tokens:
        run.append(token)
        yield list(run)

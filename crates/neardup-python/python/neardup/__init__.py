"""neardup: near-duplicate detection with 64-bit simhash fingerprints.

neardup's own API:

- ``Fingerprinter(...)`` turns texts into fingerprints (every option of the Rust one, as
  keyword arguments); ``fingerprint(text)`` and ``fingerprint_many(texts)`` use the
  defaults, those of ``neardup fingerprint``;
- ``Idf.build(texts)`` counts the idf table of ``Fingerprinter(weighting="tfidf")``, as
  ``neardup idf`` does; ``Idf.load(path)`` reads one;
- ``find_all(fingerprints, distance=6, blocks="auto", ids=None)`` gives every pair within
  ``distance`` bits, ``clusters(...)`` the connected components;
- ``Corpus`` is an in-memory index of documents (int ids) to query for near-duplicates;
  ``FingerprintStore`` the same, durable in a data directory, with str ids and expiry, and
  ``FingerprintStore.reader()`` a ``FingerprintStoreReader`` to query it from other
  threads (``Store`` and ``StoreReader``, their names before, still work, with a
  ``DeprecationWarning``);
- ``DocumentStore.create(path, threshold=0.8)`` and ``DocumentStore.open(path)`` keep the
  document corpus of ``neardup serve --data`` in a data directory, ``DocumentStore.connect(urls)``
  opens the one of ``neardup serve --redis`` in a Redis Cluster: texts in, near-duplicates
  by Jaccard similarity (as ``dedup`` decides them) out, ``check`` answering a ``Matches``
  list whose ``partial`` says whether a band key crowded past 64 documents cut it;
- ``dedup(records)`` clusters near-duplicate ``(id, text)`` records (word 5-shingle Jaccard
  at least ``threshold``, default 0.8), as ``neardup dedup``; ``neardup.ray.dedup(paths or
  a Ray Dataset)`` does the same as a Ray job on many machines (``pip install
  'neardup[ray]'``);
- ``Layout(blocks, distance)`` shows the block layout and its ``Table`` permutations.

Fingerprints are ints in 0..2**64-1; functions that take many accept any iterable of ints
or a numpy ``uint64`` array. ``neardup.simhash`` is a drop-in for seomoz simhash-py.

>>> import neardup
>>> a = " ".join(f"The fox number {i} jumps over the lazy dog number {i + 1}." for i in range(12))
>>> b = a.replace("lazy", "sleepy", 1)
>>> fps = neardup.fingerprint_many([a, b, "Something else entirely, about cats."])
>>> neardup.find_all(fps, ids=["a", "b", "c"])
[('a', 'b')]
>>> neardup.dedup([("a", a), ("b", b), ("c", "Something else entirely, about cats.")])
[['a', 'b']]
>>> corpus = neardup.Corpus(distance=6)
>>> corpus.insert_bulk([(1, fps[0]), (3, fps[2])])
>>> [doc for doc, _ in corpus.find_all(fps[1])]
[1]
"""

from neardup import simhash
from neardup._errors import ForeignStoreError, NotAStoreError, StoreError, StoreExistsError
from neardup._matches import Matches
from neardup._neardup import own as _own

Fingerprinter = _own.Fingerprinter
Idf = _own.Idf
fingerprint = _own.fingerprint
fingerprint_many = _own.fingerprint_many
find_all = _own.find_all
clusters = _own.clusters
Corpus = _own.Corpus
Layout = _own.Layout
Table = _own.Table
FingerprintStore = _own.FingerprintStore
DocumentStore = _own.DocumentStore
FingerprintStoreReader = _own.FingerprintStoreReader

# Names from before the fingerprint and document models were named apart.
_DEPRECATED = {"Store": "FingerprintStore", "StoreReader": "FingerprintStoreReader"}


def __getattr__(name: str) -> object:
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"neardup.{name} is now neardup.{new} (the fingerprint store; documents are "
        "neardup.DocumentStore)",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]

dedup = _own.dedup

__all__ = [
    "Corpus",
    "DocumentStore",
    "FingerprintStore",
    "FingerprintStoreReader",
    "Fingerprinter",
    "ForeignStoreError",
    "Idf",
    "Layout",
    "Matches",
    "NotAStoreError",
    "StoreError",
    "StoreExistsError",
    "Table",
    "clusters",
    "dedup",
    "find_all",
    "fingerprint",
    "fingerprint_many",
    "simhash",
]

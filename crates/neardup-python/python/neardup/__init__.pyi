# Types of neardup's own API (the native classes and functions re-exported by
# neardup/__init__.py); their docstrings have the details and examples.
import os
import pathlib
from typing import (
    Iterable,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from typing_extensions import Buffer, Self

from neardup import simhash as simhash
from neardup._errors import ForeignStoreError as ForeignStoreError
from neardup._errors import NotAStoreError as NotAStoreError
from neardup._errors import StoreError as StoreError
from neardup._errors import StoreExistsError as StoreExistsError

# Any iterable of ints in 0..2**64-1, or a one-dimensional buffer of 8-byte integers
# (a numpy uint64 array).
Fingerprints = Union[Iterable[int], Buffer]
Blocks = Union[int, Literal["auto"]]
StrPath = Union[str, "os.PathLike[str]"]
Id = TypeVar("Id")

class Fingerprinter:
    def __init__(
        self,
        *,
        tokenizer: str = "words",
        window: int = 2,
        weighting: Optional[Literal["tf", "none", "custom", "tfidf", "lenpos"]] = None,
        weights: Optional[Mapping[str, float]] = None,
        idf: Union[bytes, StrPath, None] = None,
        lambda_: float = 0.5,
        nfkc: bool = True,
        lowercase: bool = True,
        fold_whitespace: bool = True,
        ascii_quotes: bool = True,
        min_paragraph: int = 200,
    ) -> None: ...
    def fingerprint(self, text: str) -> int: ...
    def fingerprint_many(self, texts: Iterable[str]) -> List[int]: ...
    def fingerprint_wide(self, text: str) -> Tuple[int, int, int, int]: ...
    def paragraphs(self, text: str) -> List[Tuple[int, int, int]]: ...
    @property
    def window(self) -> int: ...

def fingerprint(text: str) -> int: ...
def fingerprint_many(texts: Iterable[str]) -> List[int]: ...
@overload
def find_all(
    fingerprints: Fingerprints,
    distance: int = 6,
    blocks: Blocks = "auto",
    ids: None = None,
) -> List[Tuple[int, int]]: ...
@overload
def find_all(
    fingerprints: Fingerprints,
    distance: int = 6,
    blocks: Blocks = "auto",
    *,
    ids: Iterable[Id],
) -> List[Tuple[Id, Id]]: ...
@overload
def clusters(
    fingerprints: Fingerprints,
    distance: int = 6,
    blocks: Blocks = "auto",
    ids: None = None,
) -> List[List[int]]: ...
@overload
def clusters(
    fingerprints: Fingerprints,
    distance: int = 6,
    blocks: Blocks = "auto",
    *,
    ids: Iterable[Id],
) -> List[List[Id]]: ...
def dedup(
    records: Iterable[Union[Tuple[Id, str], Sequence[Union[Id, str]]]],
    *,
    distance: int = 48,
    lane_distance: int = 8,
    blocks: Blocks = "auto",
    fingerprinter: Optional[Fingerprinter] = None,
) -> List[List[Id]]: ...

class Corpus:
    def __init__(self, distance: int = 3, blocks: Blocks = "auto", expected: int = 0) -> None: ...
    def insert(self, id: int, fp: int) -> Optional[int]: ...
    @overload
    def insert_bulk(self, docs: Iterable[Tuple[int, int]]) -> None: ...
    @overload
    def insert_bulk(self, docs: Fingerprints, fingerprints: Fingerprints) -> None: ...
    def remove(self, id: int) -> Optional[int]: ...
    def remove_bulk(self, ids: Fingerprints) -> int: ...
    def get(self, id: int) -> Optional[int]: ...
    def find_first(self, fp: int) -> Optional[Tuple[int, int]]: ...
    def find_all(self, fp: int) -> List[Tuple[int, int]]: ...
    def find_first_bulk(self, fps: Fingerprints) -> List[Optional[Tuple[int, int]]]: ...
    def find_all_bulk(self, fps: Fingerprints) -> List[List[Tuple[int, int]]]: ...
    def documents(self) -> List[Tuple[int, int]]: ...
    @property
    def blocks(self) -> int: ...
    @property
    def distance(self) -> int: ...
    def __len__(self) -> int: ...

class Store:
    @staticmethod
    def create(
        path: StrPath,
        distance: int = 3,
        blocks: Blocks = "auto",
        fingerprint_version: int = 2,
        expected: int = 0,
    ) -> Store: ...
    @staticmethod
    def open(path: StrPath) -> Store: ...
    def insert(self, id: str, fp: int, ttl: Optional[float] = None) -> Optional[int]: ...
    def insert_bulk(
        self,
        docs: Iterable[Union[Tuple[str, int], Tuple[str, int, Optional[float]]]],
        ttl: Optional[float] = None,
    ) -> None: ...
    def remove(self, id: str) -> bool: ...
    def remove_bulk(self, ids: Iterable[str]) -> int: ...
    def find_first(self, fp: int) -> Optional[Tuple[str, int]]: ...
    def find_all(self, fp: int) -> List[Tuple[str, int]]: ...
    def sweep(self) -> int: ...
    def documents(self) -> List[Tuple[str, int]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def distance(self) -> int: ...
    @property
    def blocks(self) -> int: ...
    @property
    def fingerprint_version(self) -> int: ...
    def __len__(self) -> int: ...

__all__: List[str]

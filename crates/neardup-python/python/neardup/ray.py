"""Batch dedup as a Ray job: ``neardup dedup --estimate``'s answer, on as many machines as
Ray has.

``dedup(source, ...)`` reads JSON Lines or Parquet files (local, ``s3://``, ``gs://``, any
filesystem pyarrow reaches) or a Ray Dataset, and finds the same clusters as ``neardup
dedup --estimate`` on one machine with the same settings (every pair decided on the
sketches' estimate; the CLI's default decides the pairs near the threshold on their
texts): the same documents kept, the same
documents removed for each, the same similarities and distances, written as the same
JSON lines. It needs Ray: ``pip install 'neardup[ray]'``.

>>> import neardup.ray  # doctest: +SKIP
>>> result = neardup.ray.dedup("corpus.jsonl", clusters="clusters.jsonl",
...                            deduplicated="deduplicated.jsonl")  # doctest: +SKIP
>>> result.stats["kept"]  # doctest: +SKIP

How the job runs (docs/ray.md has the details and the figures):

1. **Signatures.** The input is cut into units (byte ranges of JSON Lines files, at line
   boundaries, four per CPU and at most 64 MiB; a few row groups of a Parquet file; a
   block of a Dataset). A task per
   unit reads it and computes each document's signature in Rust with the GIL released:
   text hash and 256-bit fingerprint (which document is a copy of which), text length,
   128-byte Jaccard sketch and 20 band keys. Each document is numbered by its unit and
   its place in it, so input order is global. Texts stay where they were read.
2. **Nodes.** Signatures are shuffled by text hash: documents with equal text hash and
   fingerprint are one node, as in ``neardup dedup``, known by its first document.
3. **Buckets.** Each node's band keys are shuffled by (band, key); a bucket's nodes that
   agree in some band are candidate pairs (the core's ``band_candidates``).
4. **Verification.** Each pair meets the sketches of its two nodes on the workers that
   hold them; the core's ``measure`` and the threshold decide.
5. **Assignment**, on the driver, in Rust (``neardup::batch::assign``, the code
   ``neardup dedup`` runs): from the verified edges alone, each node kept or removed for
   its most similar kept neighbour, visited in ``keep`` order, without chaining.
6. **Outputs.** Cluster members are expanded to documents, each unit is read a second
   time to write the records kept and to find the ids clusters name, and clusters are
   written in the CLI's order and format.

Memory per task is bounded by the unit size (``unit_bytes``, at most 64 MiB by default)
or by a partition of the compact records (about 600 bytes a document over
``partitions``); the driver holds the verified edges (about 40 bytes each) and one range
of clusters at a time.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
import warnings
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import numpy as np

try:
    import ray
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "neardup.ray needs Ray Data and pyarrow: pip install 'neardup[ray]'"
    ) from e

from neardup import DocumentStore as _DocumentStore
from neardup._neardup import own as _own
from neardup._neardup import ray as _k

__all__ = ["Result", "dedup"]

#: Bits of a document's position that number it within its unit; the unit's number is
#: above them, so positions sort in input order.
_LOCAL_BITS = 40
_LOCAL_MASK = (1 << _LOCAL_BITS) - 1
#: Positions from here on stand for the stored documents of `against=` (numbered in the
#: order of the first records removed for them), after every record's.
_STORED = 1 << 63
#: Bytes of a sketch, lanes of a fingerprint, band keys of a document.
_SKETCH = 128
_LANES = 4
_BANDS = 20
#: Bytes handed to Rust at a time within a unit: bounds a task's memory with the unit's.
_CHUNK = 16 << 20
#: Times a task is tried again when its worker or node dies.
_RETRIES = 3
#: Times the whole job is run again when Ray loses an object it cannot rebuild.
_JOB_RETRIES = 2


@dataclasses.dataclass
class Result:
    """What ``dedup`` found.

    ``clusters``: the clusters as ``neardup dedup --clusters`` writes them, as dicts
    (``cluster``, ``size``, ``representative``, ``members``: ``id``, ``similarity``,
    ``distance``), unless they were written to a file (``None`` then).
    ``deduplicated``: a Ray Dataset of the records kept, in input order, unless they were
    written to a path or not asked for (``None`` then).
    ``stats``: counts as ``neardup dedup --stats-json`` gives them, and seconds per stage.
    """

    clusters: Optional[list]
    deduplicated: Optional["ray.data.Dataset"]
    stats: dict


# --- inputs -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Unit:
    """A piece of the input that one task reads, twice: a byte range of a JSON Lines file
    (the lines that start in it), row groups of a Parquet file, or a block of a Dataset."""

    kind: str  # "jsonl", "parquet" or "block"
    shown: str = ""  # the file's name as `neardup dedup` shows it (in ids and errors)
    fs: Any = None
    path: str = ""
    file: int = 0  # the file's number among the inputs
    start: int = 0  # jsonl: byte range [start, end); parquet: first row in the file
    end: int = 0
    compression: Optional[str] = None
    groups: tuple = ()  # parquet row groups
    size: int = 0  # bytes to read


def _format_of(name: str, given: Optional[str]) -> tuple:
    """The format and compression of a file, from `format` or its name as the CLI reads
    it (.jsonl/.ndjson, optionally .gz/.zst; .parquet)."""
    lower = name.lower()
    compression = None
    for suffix, kind in ((".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd")):
        if lower.endswith(suffix):
            lower, compression = lower[: -len(suffix)], kind
            break
    fmt = given
    if fmt is None:
        if lower.endswith((".jsonl", ".ndjson")):
            fmt = "jsonl"
        elif lower.endswith(".parquet") and compression is None:
            fmt = "parquet"
        else:
            raise ValueError(
                f"{name}: neardup.ray reads JSON Lines (.jsonl, .ndjson, also .gz or .zst) "
                "and Parquet (.parquet); name the format with format='jsonl' or 'parquet'"
            )
    if fmt not in ("jsonl", "parquet"):
        raise ValueError(f"format must be 'jsonl' or 'parquet', got {fmt!r}")
    if fmt == "parquet" and compression is not None:
        raise ValueError(f"{name}: Parquet files are read as they are, not compressed")
    return fmt, compression


def _local_files(name: str) -> list:
    """The files of a local input as `neardup dedup` lists them: a file as named; a
    directory's files recursively, each directory's entries in name order (walkdir's
    order), symbolic links not followed."""
    if not os.path.exists(name):
        raise FileNotFoundError(f"cannot read input '{name}': no such file or directory")
    if not os.path.isdir(name):
        return [name]
    out = []

    def walk(d: str) -> None:
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: os.fsencode(e.name))
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                walk(e.path)
            elif e.is_file(follow_symlinks=False):
                out.append(e.path)

    walk(name)
    return out


def _files(paths: Sequence[str]) -> list:
    """(filesystem, path to open, name shown) of every input file, in input order."""
    out = []
    for name in paths:
        if "://" not in name:
            fs = pafs.LocalFileSystem()
            out.extend((fs, os.path.abspath(f), f) for f in _local_files(name))
            continue
        fs, root = pafs.FileSystem.from_uri(name)
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"cannot read input '{name}': not found")
        if info.type != pafs.FileType.Directory:
            out.append((fs, root, name))
            continue
        found = fs.get_file_info(pafs.FileSelector(root, recursive=True))
        files = [f.path for f in found if f.type == pafs.FileType.File]
        # Component by component, as a walk in name order visits them.
        files.sort(key=lambda p: [c.encode() for c in p.split("/")])
        prefix = name.rstrip("/")
        out.extend((fs, f, prefix + f[len(root.rstrip("/")):]) for f in files)
    return out


def _plan(paths: Sequence[str], fmt: Optional[str], unit_bytes: Optional[int], cpus: int) -> list:
    """The units of the input files: of `unit_bytes`, or by default four per CPU of the
    cluster, from 1 MiB to 64 MiB each."""
    files = _files(paths)
    if unit_bytes is None:
        total = sum(fs.get_file_info(path).size or 0 for fs, path, _ in files)
        unit_bytes = min(max(total // (4 * cpus), 1 << 20), 64 << 20)
    units = []
    for number, (fs, path, shown) in enumerate(files):
        kind, compression = _format_of(shown, fmt)
        if kind == "parquet":
            meta = pq.ParquetFile(fs.open_input_file(path)).metadata
            first, group, size = 0, [], 0
            for g in range(meta.num_row_groups):
                rg = meta.row_group(g)
                if group and size + rg.total_byte_size > unit_bytes:
                    units.append(_Unit("parquet", shown, fs, path, number, first, 0, None, tuple(group), size))
                    first += sum(meta.row_group(i).num_rows for i in group)
                    group, size = [], 0
                group.append(g)
                size += rg.total_byte_size
            if group:
                units.append(_Unit("parquet", shown, fs, path, number, first, 0, None, tuple(group), size))
            continue
        if compression is not None:
            size = fs.get_file_info(path).size or 0
            units.append(_Unit("jsonl", shown, fs, path, number, 0, -1, compression, size=size))
            continue
        size = fs.get_file_info(path).size or 0
        for start in range(0, max(size, 1), unit_bytes):
            stop = min(start + unit_bytes, size)
            units.append(_Unit("jsonl", shown, fs, path, number, start, stop, size=stop - start))
    if not units:
        raise ValueError("no input files")
    return units


def _line_chunks(unit: _Unit, chunk: int = _CHUNK) -> Iterator[bytes]:
    """The lines of a JSON Lines unit, whole, in chunks of about `chunk` bytes: those that
    start in its byte range (the last one read to its end), or every line of a compressed
    file."""
    if unit.compression is not None:
        stream = unit.fs.open_input_stream(unit.path, compression=unit.compression)
        base, end = 0, None
    else:
        stream = unit.fs.open_input_file(unit.path)
        base, end = unit.start, unit.end
    with stream:
        buf = bytearray()
        if base > 0:
            # The line that holds byte start - 1 belongs to the unit before: skip to its end.
            stream.seek(base - 1)
            base -= 1
            while True:
                block = stream.read(1 << 16)
                if not block:
                    return
                cut = block.find(b"\n")
                if cut >= 0:
                    base += cut + 1
                    buf += block[cut + 1:]
                    break
                base += len(block)
        if end is not None and base >= end:
            return
        # `buf` holds the bytes from offset `base` on. The unit ends with the line that holds
        # byte end - 1: at the first newline at or after it.
        while True:
            if end is not None and end - 1 - base < len(buf):
                cut = buf.find(b"\n", max(end - 1 - base, 0))
                if cut >= 0:
                    del buf[cut + 1:]
                    break
            if len(buf) >= chunk:
                # Every newline in `buf` ends a line of the unit.
                cut = buf.rfind(b"\n")
                if cut >= 0:
                    yield bytes(buf[: cut + 1])
                    base += cut + 1
                    del buf[: cut + 1]
            want = chunk if end is None else max(min(chunk, end - base - len(buf)), 1 << 16)
            block = stream.read(want)
            if not block:
                break
            buf += block
        if buf:
            yield bytes(buf)


def _line_number(unit: _Unit, line: int) -> int:
    """The line number (from 1) in its file of line `line` (from 0) of a unit: for
    messages, counting the lines before the unit's first."""
    if unit.start == 0 or unit.compression is not None:
        return line + 1
    # The newlines before byte start - 1, and the one that ends the unit before's last line.
    before = 1
    with unit.fs.open_input_file(unit.path) as f:
        left = unit.start - 1
        while left > 0:
            block = f.read(min(left, 1 << 20))
            if not block:
                break
            before += block.count(b"\n")
            left -= len(block)
    return before + line + 1


def _texts(table: "pa.Table", column: str, where: Callable[[int], str]) -> tuple:
    """The offsets and bytes of a string column, for Rust."""
    if column not in table.column_names:
        raise ValueError(f"{where(None)}: no column \"{column}\" (columns: {', '.join(table.column_names)})")
    arr = table.column(column).combine_chunks()
    is_view = getattr(pa.types, "is_string_view", lambda t: False)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or is_view(arr.type)):
        raise ValueError(f"{where(None)}: column \"{column}\" is not a string column but {arr.type}")
    if arr.null_count:
        first = int(np.flatnonzero(np.asarray(arr.is_null()))[0])
        raise ValueError(f"{where(first)}: column \"{column}\" is null")
    arr = arr.cast(pa.large_string())
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype="<i8")[arr.offset: arr.offset + len(arr) + 1]
    data = buffers[2] if buffers[2] is not None else pa.py_buffer(b"")
    return offsets.tobytes(), memoryview(data)


def _json(value: Any) -> str:
    """A value as compact JSON, as serde_json writes ids (a value JSON has no type for,
    a date say, as its text)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _table(unit: _Unit, block: Optional["pa.Table"], columns: Optional[list]) -> "pa.Table":
    """A tabular unit's rows."""
    if unit.kind == "block":
        if not isinstance(block, pa.Table):
            block = pa.Table.from_pandas(block, preserve_index=False)
        return block
    pf = pq.ParquetFile(unit.fs.open_input_file(unit.path))
    names = pf.schema_arrow.names
    cols = None if columns is None else [c for c in columns if c in names]
    return pf.read_row_groups(list(unit.groups), columns=cols)


# --- tasks --------------------------------------------------------------------------------


def _returns(values: list) -> Any:
    """What a task of `len(values)` returns returns: a lone value is not a list."""
    return values[0] if len(values) == 1 else values


def _concat(pieces: Sequence[dict], fields: dict) -> dict:
    """The arrays of `pieces` (dicts of numpy arrays) joined field by field; `fields` maps
    each field to its dtype and row shape, for when there are none."""
    out = {}
    for name, (dtype, shape) in fields.items():
        parts = [p[name] for p in pieces if p is not None and len(p[name])]
        out[name] = np.concatenate(parts) if parts else np.empty((0,) + shape, dtype=dtype)
    return out


def _split(rows: dict, keys: np.ndarray, n: int) -> list:
    """`rows` (dict of arrays, or lists) split by `keys` in 0..n, order kept."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1))
    out = []
    for i in range(n):
        idx = order[bounds[i]: bounds[i + 1]]
        out.append({k: ([v[j] for j in idx] if isinstance(v, list) else v[idx]) for k, v in rows.items()})
    return out


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit mix of `x`, for spreading keys over partitions."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    return x


_SIGNATURES = {
    "pos": (np.uint64, ()),
    "text_hash": (np.uint64, ()),
    "fingerprint": (np.uint64, (_LANES,)),
    "len": (np.uint32, ()),
    "sketch": (np.uint8, (_SKETCH,)),
    "bands": (np.uint32, (_BANDS,)),
}


def _signature_arrays(found: dict) -> dict:
    n = len(found["text_hash"]) // 8
    return {
        "text_hash": np.frombuffer(found["text_hash"], dtype="<u8"),
        "fingerprint": np.frombuffer(found["fingerprint"], dtype="<u8").reshape(n, _LANES),
        "len": np.frombuffer(found["len"], dtype="<u4"),
        "sketch": np.frombuffer(found["sketch"], dtype=np.uint8).reshape(n, _SKETCH),
        "bands": np.frombuffer(found["bands"], dtype="<u4").reshape(n, _BANDS),
    }


def _inject(cfg: dict, stage: str, index: int) -> None:
    """The test hook of `dedup(_fault=...)`: called as each task starts."""
    hook = cfg.get("fault")
    if hook is not None:
        hook(stage, index)


def _sign(unit: _Unit, block: Any, u: int, parts: int, cfg: dict):
    """Pass 1 of a unit: its documents' signatures, shuffled by text hash into `parts`
    pieces, and what it counted."""
    _inject(cfg, "sign", u)
    pieces, lines, invalid = [], 0, 0
    fp = cfg["fingerprinter"]
    if unit.kind == "jsonl":
        for chunk in _line_chunks(unit):
            found = _k.sign_jsonl(chunk, text_field=cfg["text"], id_field=cfg["id"],
                                  threshold=cfg["threshold"], fingerprinter=fp,
                                  threads=cfg["threads"])
            if "error" in found:
                line, why = found["error"]
                raise ValueError(f"{unit.shown}:{_line_number(unit, lines + line)}: {why}")
            lines += found["lines"]
            invalid += found["invalid_utf8"]
            pieces.append(_signature_arrays(found))
    else:
        table = _table(unit, block, [cfg["text"]])
        def row(i: Optional[int]) -> str:
            if unit.kind == "parquet":
                return unit.shown if i is None else f"{unit.shown}:{unit.start + i + 1}"
            return "the Dataset" if i is None else f"row {i} of block {u} of the Dataset"
        offsets, data = _texts(table, cfg["text"], row)
        found = _k.sign_texts(offsets, data, threshold=cfg["threshold"], fingerprinter=fp,
                              threads=cfg["threads"])
        pieces.append(_signature_arrays(found))
    sig = _concat([{**p, "pos": np.empty(len(p["len"]), np.uint64)} for p in pieces], _SIGNATURES)
    n = len(sig["len"])
    if n > _LOCAL_MASK:
        raise ValueError(f"{unit.shown}: more than 2**40 documents in one unit")
    sig["pos"] = (np.uint64(u) << np.uint64(_LOCAL_BITS)) | np.arange(n, dtype=np.uint64)
    info = {"docs": n, "lines": lines, "invalid_utf8": invalid,
            "bytes": int(sig["len"].sum(dtype=np.uint64))}
    keys = ((sig["text_hash"] >> np.uint64(32)) % np.uint64(parts)).astype(np.int64)
    return [info] + _split(sig, keys, parts)


_BAND_RECORDS = {"key": (np.uint64, ()), "pos": (np.uint64, ()), "part": (np.uint32, ()),
                 "len": (np.uint32, ())}


def _nodes(p: int, parts: int, cfg: dict, *pieces: dict):
    """Partition `p` of the signatures: its nodes (documents with equal text hash and
    fingerprint, known by the first), their band keys shuffled by (band, key)."""
    _inject(cfg, "nodes", p)
    sig = _concat(pieces, _SIGNATURES)
    n = len(sig["pos"])
    fp = sig["fingerprint"]
    order = np.lexsort((sig["pos"], fp[:, 3], fp[:, 2], fp[:, 1], fp[:, 0], sig["text_hash"]))
    sig = {k: v[order] for k, v in sig.items()}
    fp = sig["fingerprint"]
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = (sig["text_hash"][1:] != sig["text_hash"][:-1]) | (fp[1:] != fp[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    size = np.diff(np.append(starts, n)).astype(np.int64)
    kept_fields = ("pos", "len", "fingerprint", "sketch")
    if cfg.get("against"):
        # What a store lookup needs besides: the text hash and the band keys.
        kept_fields += ("text_hash", "bands")
    node = {k: sig[k][starts] for k in kept_fields}
    node["size"] = size
    bands = sig["bands"][starts]
    # Copies, by the node they belong to (its first document).
    copy_owner = np.repeat(node["pos"], size - 1)
    copy_pos = sig["pos"][~new]
    by_pos = np.argsort(node["pos"], kind="stable")
    table = {k: v[by_pos] for k, v in node.items()}
    bands = bands[by_pos]
    c = np.lexsort((copy_pos, copy_owner))
    table["copy_owner"], table["copy_pos"] = copy_owner[c], copy_pos[c]
    wordless = ~bands.any(axis=1)
    stats = {"docs": n, "nodes": len(starts), "wordless": int(table["size"][wordless].sum())}
    # Band records of the nodes with words: key = band << 32 | key; zero keys agree
    # with nothing.
    band_of = np.broadcast_to(np.arange(_BANDS, dtype=np.uint64), bands.shape)
    live = bands != 0
    live[wordless] = False
    keys = (band_of[live] << np.uint64(32)) | bands[live].astype(np.uint64)
    pos = np.broadcast_to(table["pos"][:, None], bands.shape)[live]
    lens = np.broadcast_to(table["len"][:, None], bands.shape)[live]
    records = {"key": keys, "pos": pos, "part": np.full(len(keys), p, dtype=np.uint32),
               "len": lens}
    dest = (_mix(keys) % np.uint64(parts)).astype(np.int64)
    return [stats, table] + _split(records, dest, parts)


_PAIRS = {"a": (np.uint64, ()), "b": (np.uint64, ()), "part_b": (np.uint32, ())}


def _bucket(q: int, parts: int, cfg: dict, *pieces: dict):
    """Bucket `q` of band keys: pairs of nodes that agree in some band, sent to the
    partition of their first node."""
    _inject(cfg, "buckets", q)
    rec = _concat(pieces, _BAND_RECORDS)
    # A key held by one node alone makes no pair.
    _, inverse, counts = np.unique(rec["key"], return_inverse=True, return_counts=True)
    shared = counts[inverse] > 1
    rec = {k: v[shared] for k, v in rec.items()}
    nodes, local = np.unique(rec["pos"], return_inverse=True)
    part = np.zeros(len(nodes), dtype=np.uint32)
    part[local] = rec["part"]
    lens = np.zeros(len(nodes), dtype=np.uint32)
    lens[local] = rec["len"]
    # Nodes are numbered in input order (np.unique sorts), as a crowded run's leaders are
    # chosen in the keep rule's order.
    a, b = _k.bucket_pairs(rec["key"].astype("<u8").tobytes(),
                           local.astype("<u4").tobytes(), len(nodes),
                           lens=lens.astype("<u4").tobytes(), keep=cfg["keep"])
    a = np.frombuffer(a, dtype="<u4").astype(np.int64)
    b = np.frombuffer(b, dtype="<u4").astype(np.int64)
    pairs = {"a": nodes[a], "b": nodes[b], "part_b": part[b]}
    return _returns(_split(pairs, part[a].astype(np.int64), parts))


def _lookup(table: dict, pos: np.ndarray) -> np.ndarray:
    """Rows of `table` (sorted by pos) for the nodes at `pos`, all of which it holds."""
    idx = np.searchsorted(table["pos"], pos)
    if len(pos) and (idx.max() >= len(table["pos"]) or (table["pos"][idx] != pos).any()):
        raise RuntimeError("neardup.ray: a node is missing from its partition")
    return idx


_HALF = {
    "a": (np.uint64, ()),
    "b": (np.uint64, ()),
    "part_a": (np.uint32, ()),
    "len_a": (np.uint32, ()),
    "sketch_a": (np.uint8, (_SKETCH,)),
    "fingerprint_a": (np.uint64, (_LANES,)),
}


def _near_a(p: int, parts: int, cfg: dict, table: dict, *pieces: dict):
    """The pairs whose first node is in partition `p`, each once, with that node's sketch,
    fingerprint and length, sent to the partition of the second."""
    _inject(cfg, "near", p)
    pairs = _concat(pieces, _PAIRS)
    order = np.lexsort((pairs["b"], pairs["a"]))
    pairs = {k: v[order] for k, v in pairs.items()}
    if len(order) > 1:
        first = np.ones(len(order), dtype=bool)
        first[1:] = (pairs["a"][1:] != pairs["a"][:-1]) | (pairs["b"][1:] != pairs["b"][:-1])
        pairs = {k: v[first] for k, v in pairs.items()}
    idx = _lookup(table, pairs["a"])
    half = {
        "a": pairs["a"], "b": pairs["b"],
        "part_a": np.full(len(idx), p, dtype=np.uint32),
        "len_a": table["len"][idx],
        "sketch_a": table["sketch"][idx],
        "fingerprint_a": table["fingerprint"][idx],
    }
    return [len(idx)] + _split(half, pairs["part_b"].astype(np.int64), parts)


_EDGES = {
    "a": (np.uint64, ()),
    "b": (np.uint64, ()),
    "part_a": (np.uint32, ()),
    "part_b": (np.uint32, ()),
    "len_a": (np.uint32, ()),
    "len_b": (np.uint32, ()),
    "similarity": (np.float32, ()),
    "distance": (np.uint32, ()),
}


def _near_b(q: int, cfg: dict, threshold: Optional[float], table: dict, *pieces: dict):
    """The pairs whose second node is in partition `q`, measured (the core's `measure`):
    those the threshold accepts (all of them without one)."""
    _inject(cfg, "verify", q)
    half = _concat(pieces, _HALF)
    idx = _lookup(table, half["b"])
    sim, dist, ok = _k.measure(
        np.ascontiguousarray(half["sketch_a"]).tobytes(), table["sketch"][idx].tobytes(),
        np.ascontiguousarray(half["fingerprint_a"], dtype="<u8").tobytes(),
        table["fingerprint"][idx].astype("<u8").tobytes(), threshold)
    ok = np.frombuffer(ok, dtype=np.uint8).astype(bool)
    edges = {
        "a": half["a"], "b": half["b"], "part_a": half["part_a"],
        "part_b": np.full(len(idx), q, dtype=np.uint32),
        "len_a": half["len_a"], "len_b": table["len"][idx],
        "similarity": np.frombuffer(sim, dtype="<f4"),
        "distance": np.frombuffer(dist, dtype="<u4"),
    }
    return {k: v[ok] for k, v in edges.items()}


_ROWS = {
    "rep": (np.uint64, ()),
    "doc": (np.uint64, ()),
    "similarity": (np.float32, ()),
    "distance": (np.uint32, ()),
}


def _expand(p: int, cfg: dict, table: dict, links: dict, leads: np.ndarray,
            group_of_unit: np.ndarray, groups: int):
    """The cluster rows of partition `p`'s documents: (representative, document,
    similarity, distance), sent to the group of units the document is in."""
    _inject(cfg, "expand", p)
    n = len(table["pos"])
    rep = table["pos"].copy()
    sim = np.ones(n, dtype=np.float32)
    dist = np.zeros(n, dtype=np.uint32)
    linked = np.zeros(n, dtype=bool)
    if len(links["pos"]):
        idx = _lookup(table, links["pos"])
        rep[idx], sim[idx], dist[idx], linked[idx] = links["rep"], links["similarity"], links["distance"], True
    # A node is in a cluster when it is removed for another, or kept with copies or with
    # nodes removed for it.
    keep = linked | (table["size"] > 1) | np.isin(table["pos"], leads)
    own = {"rep": rep[keep], "doc": table["pos"][keep], "similarity": sim[keep], "distance": dist[keep]}
    owner = _lookup(table, table["copy_owner"]) if len(table["copy_owner"]) else np.empty(0, np.int64)
    copies = {"rep": rep[owner], "doc": table["copy_pos"], "similarity": sim[owner], "distance": dist[owner]}
    rows = _concat([own, copies], _ROWS)
    unit = (rows["doc"] >> np.uint64(_LOCAL_BITS)).astype(np.int64)
    return _returns(_split(rows, group_of_unit[unit], groups))


def _regroup(units: list, *pieces: dict):
    """A group's cluster rows split by unit, each unit's sorted by document."""
    rows = _concat(pieces, _ROWS)
    order = np.argsort(rows["doc"], kind="stable")
    rows = {k: v[order] for k, v in rows.items()}
    unit = (rows["doc"] >> np.uint64(_LOCAL_BITS)).astype(np.int64)
    index = np.searchsorted(np.asarray(units), unit)
    return _returns(_split(rows, index, len(units)))


def _block_bytes(block: "pa.Table") -> int:
    return int(block.nbytes) if isinstance(block, pa.Table) else int(block.memory_usage(deep=True).sum())


def _write_bytes(fs: Any, path: str, data: bytes) -> None:
    with fs.open_output_stream(path) as out:
        out.write(data)


def _pick(unit: _Unit, block: Any, u: int, rows: dict, cfg: dict, first_line: int,
          first_row: int, range_of_unit: np.ndarray, ranges: int):
    """Pass 2 of a unit: the records it keeps, with `save=` the ids (as a store names
    them) and texts of the documents it keeps, and the ids of its documents in clusters
    (each cluster row with its document's id as JSON), sent to the range of units its
    representative is in."""
    _inject(cfg, "pick", u)
    local = (rows["doc"] & np.uint64(_LOCAL_MASK)).astype(np.int64)
    drop = local[rows["doc"] != rows["rep"]]
    out = cfg["deduplicated"]
    records = out is not None
    save = bool(cfg.get("save"))
    ids: list = []
    kept: Any = None
    saved: Optional[dict] = {"id": [], "text": []} if save else None
    if unit.kind == "jsonl":
        parts, docs, lines = [], 0, 0
        for chunk in _line_chunks(unit):
            lo_d, lo_w = np.searchsorted(drop, docs), np.searchsorted(local, docs)
            kept_bytes, found, count, to_save = _k.pick_jsonl(
                chunk, text_field=cfg["text"], id_field=cfg["id"],
                drop=(drop[lo_d:] - docs).astype("<u4").tobytes(),
                want=(local[lo_w:] - docs).astype("<u4").tobytes(), records=records, save=save)
            for line, id_json in found:
                if id_json is None:
                    id_json = _json(f"{unit.shown}:{first_line + lines + line + 1}")
                ids.append(id_json)
            for line, name, text in to_save:
                saved["id"].append(f"{unit.shown}:{first_line + lines + line + 1}" if name is None else name)
                saved["text"].append(text)
            parts.append(kept_bytes)
            docs += count
            lines += chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        if records:
            kept = b"".join(parts)
            if out["format"] == "parquet" or out["kind"] == "dataset":
                kept = _parse_jsonl(kept)
    else:
        table = _table(unit, block, None if records or save else [cfg["id"]])
        id_col = cfg["id"] if cfg["id"] in table.column_names else None
        values = table.column(id_col).take(pa.array(local)).to_pylist() if id_col else [None] * len(local)
        for i, v in zip(local, values):
            if v is not None:
                ids.append(_json(v))
            elif unit.kind == "parquet":
                ids.append(_json(f"{unit.shown}:{unit.start + int(i) + 1}"))
            else:
                ids.append(_json(first_row + int(i)))
        if records:
            mask = np.ones(table.num_rows, dtype=bool)
            mask[drop] = False
            kept = table.filter(pa.array(mask))
            if out["format"] == "jsonl":
                kept = _id_text_lines(kept, cfg, unit, first_row, mask)
        if save:
            saved = _kept_to_save(table, cfg, unit, first_row, drop)
    if records and out["kind"] == "dir":
        ext = out["format"]
        name = f"{out['path'].rstrip('/')}/part-{u:06d}.{ext}"
        if ext == "jsonl":
            _write_bytes(out["fs"], name, kept)
        else:
            with out["fs"].open_output_stream(name) as f:
                pq.write_table(kept, f)
        kept = None
    # Cluster rows with ids, by the range of units of their representative.
    with_ids = {**rows, "id": ids}
    stored = rows["rep"] >= np.uint64(_STORED)
    rep_unit = np.where(stored, 0, rows["rep"] >> np.uint64(_LOCAL_BITS)).astype(np.int64)
    # Clusters of stored documents come after every other, in the last range.
    target = np.where(stored, ranges - 1, range_of_unit[rep_unit])
    return [kept, saved] + _split(with_ids, target, ranges)


def _kept_to_save(table: "pa.Table", cfg: dict, unit: _Unit, first_row: int,
                  drop: np.ndarray) -> dict:
    """The kept rows of a table as ``neardup dedup --save`` stores them: a string id as
    itself, another as JSON text, a missing one as the row's place (``path:row``, or the
    position in a Dataset)."""
    mask = np.ones(table.num_rows, dtype=bool)
    mask[drop] = False
    rows = np.flatnonzero(mask)
    texts = table.column(cfg["text"]).take(pa.array(rows)).to_pylist()
    if cfg["id"] in table.column_names:
        values = table.column(cfg["id"]).take(pa.array(rows)).to_pylist()
    else:
        values = [None] * len(rows)
    names = []
    for i, v in zip(rows, values):
        if v is None:
            v = f"{unit.shown}:{unit.start + int(i) + 1}" if unit.kind == "parquet" else _json(first_row + int(i))
        names.append(v if isinstance(v, str) else _json(v))
    return {"id": names, "text": ["" if t is None else t for t in texts]}


def _parse_jsonl(data: bytes) -> "pa.Table":
    """Kept JSON lines as a table (pyarrow's JSON reader), for a Dataset or Parquet."""
    import pyarrow.json as pajson

    if not data:
        return pa.table({})
    return pajson.read_json(pa.BufferReader(data))


def _id_text_lines(table: "pa.Table", cfg: dict, unit: _Unit, first_row: int,
                   mask: np.ndarray) -> bytes:
    """Kept rows of a table as `neardup dedup` writes records without lines of their own:
    {"id", "text"} JSON lines."""
    rows = np.flatnonzero(mask)
    texts = table.column(cfg["text"]).to_pylist()
    if cfg["id"] in table.column_names:
        values = table.column(cfg["id"]).to_pylist()
    else:
        values = [None] * len(texts)
    out = []
    for i, text, v in zip(rows, texts, values):
        if v is None:
            v = f"{unit.shown}:{unit.start + int(i) + 1}" if unit.kind == "parquet" else first_row + int(i)
        out.append(_json({"id": v, "text": text}))
    return ("\n".join(out) + "\n").encode() if out else b""


def _assemble(*pieces: dict):
    """A range's cluster rows sorted by representative, then document."""
    rows = _concat(pieces, _ROWS)
    ids = [i for p in pieces if p is not None for i in p["id"]]
    order = np.lexsort((rows["doc"], rows["rep"]))
    rows = {k: v[order] for k, v in rows.items()}
    rows["id"] = [ids[i] for i in order]
    reps, counts = np.unique(rows["rep"], return_counts=True)
    return {"rows": rows, "clusters": len(reps), "largest": int(counts.max()) if len(counts) else 0}


# Remote handles. The functions stay module attributes, so Ray pickles them by name (a
# decorated function would be pickled whole, with the native module it calls).
_sign_task = ray.remote(_sign)
_nodes_task = ray.remote(_nodes)
_bucket_task = ray.remote(_bucket)
_near_a_task = ray.remote(_near_a)
_near_b_task = ray.remote(_near_b)
_expand_task = ray.remote(_expand)
_regroup_task = ray.remote(_regroup)
_nbytes = ray.remote(_block_bytes)
_pick_task = ray.remote(_pick)
_assemble_task = ray.remote(_assemble)


# --- the job ------------------------------------------------------------------------------


def _wait(refs: list) -> list:
    """The values of `refs`, errors of tasks raised as their own exceptions."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        # A user's error (a bad record, a missing column, an unreadable file) as itself.
        if isinstance(getattr(e, "cause", None), (ValueError, TypeError, OSError)):
            raise e.cause from None
        raise


def _is_dataset(source: Any) -> bool:
    return isinstance(source, ray.data.Dataset)


def _output(path: Optional[Union[str, bool]], what: str) -> Optional[dict]:
    """Where an output goes: None (not asked for), returned, a single file, or a
    directory of parts (its format, None here, is the input's)."""
    if path is False:
        return None
    if path is None:
        return {"kind": "dataset" if what == "deduplicated" else "list", "format": None}
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path, None or False, got {type(path).__name__}")
    path = os.fspath(path)
    lower = path.lower()
    if "://" in path:
        fs, target = pafs.FileSystem.from_uri(path)
    else:
        fs, target = pafs.LocalFileSystem(), os.path.abspath(path)
    for suffix, fmt in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".parquet", "parquet")):
        if lower.endswith(suffix):
            return {"kind": "file", "format": fmt, "fs": fs, "path": target, "shown": path}
    if what == "clusters":
        raise ValueError(f"clusters must be written to a .jsonl or .parquet file, got {path!r}")
    return {"kind": "dir", "format": None, "fs": fs, "path": target, "shown": path}


def _prepare(out: Optional[dict]) -> None:
    """The directory an output goes to, made."""
    if out is None or "path" not in out:
        return
    where = out["path"] if out["kind"] == "dir" else os.path.dirname(out["path"])
    if where:
        out["fs"].create_dir(where, recursive=True)


def _check_inputs(paths: Sequence[str], out: Optional[dict]) -> None:
    """Writing over an input would destroy it before the second pass reads it."""
    if out is None or "path" not in out or "://" in out["shown"]:
        return
    target = os.path.realpath(out["path"])
    for name in paths:
        if "://" in name:
            continue
        real = os.path.realpath(name)
        if target == real or target.startswith(real.rstrip("/") + "/"):
            raise ValueError(f"output '{out['shown']}' is an input: write the results elsewhere")


def _dedup_once(
    source: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]], "ray.data.Dataset"],
    *,
    text_column: str = "text",
    id_column: str = "id",
    threshold: float = 0.8,
    keep: str = "first",
    closure: bool = False,
    clusters: Optional[Union[str, bool]] = None,
    deduplicated: Optional[Union[str, bool]] = None,
    format: Optional[str] = None,
    fingerprinter: Optional["_own.Fingerprinter"] = None,
    partitions: Optional[int] = None,
    unit_bytes: Optional[int] = None,
    cpus_per_task: int = 1,
    against: Optional["_DocumentStore"] = None,
    save: bool = False,
    _fault: Optional[Callable[[str, int], None]] = None,
) -> Result:
    """Near-duplicate clusters of `source` and the records to keep, as ``neardup dedup
    --estimate`` finds them with the same settings, computed by Ray tasks (``ray.init()`` first, or
    Ray starts a local cluster).

    `source`: JSON Lines or Parquet paths (files or directories, read as ``neardup
    dedup`` reads them: directories recursively in name order; ``s3://`` and other
    pyarrow filesystems too), or a Ray Dataset (its rows in order; the id of a row
    without `id_column` is its position). `text_column` and `id_column` name the fields
    (columns) of the text and the id; a record without an id is ``path:line``
    (``path:row`` for Parquet).

    `threshold` (Jaccard similarity of word 5-shingle sets, estimated from sketches),
    `keep` (``"first"``, ``"longest"``, ``"shortest"``) and `closure` are those of
    ``neardup dedup``. Words are lowercased ``\\w+`` runs, and each character of Chinese,
    Japanese, Thai and the other scripts written without spaces is a word. `fingerprinter`
    is refused (``ValueError``), as ``neardup dedup`` refuses fingerprint flags with a
    threshold: it would change only the clusters' ``distance`` column.

    `clusters`: a ``.jsonl`` file to write them to, as ``neardup dedup --clusters`` does
    (a ``.parquet`` file also works), ``None`` to return them in the result, ``False``
    for neither. `deduplicated`: a ``.jsonl`` or ``.parquet`` file, a directory (one part
    per unit, in the input's format), ``None`` for a Dataset in the result, ``False`` for
    none. JSON Lines inputs are written as read, like ``neardup dedup --deduplicated``;
    others as ``{"id", "text"}`` lines in a ``.jsonl`` file.

    `against`: a ``neardup.DocumentStore`` open in this process (a data directory's or a
    Redis Cluster's); the records that are near-duplicates of a stored document are
    removed too, as ``neardup dedup --against`` removes them (the answer that of
    deduplicating the stored documents followed by `source`, the stored ones kept; its
    clusters after the others, marked ``"stored": true``). The store is looked up from
    this process, a partition at a time; its threshold must be `threshold`, and
    `closure` is refused. `save=True` then puts the records kept into that store, as
    ``neardup dedup --save`` does: in input order, each only if the store finds no
    near-duplicate of it stored, ids as the CLI names them (a string id as itself,
    another as its JSON text, a missing one ``path:line``, ``path:row`` or the position
    in a Dataset). A kept record whose id is stored already or is another kept record's
    is refused (``ValueError``) before anything is saved. ``stats["settings"]["store"]``
    counts ``saved`` and ``refused_by_store``.

    `partitions` (of the shuffles; default: at least the cluster's CPUs, and one per GiB
    of input), `unit_bytes` (the bytes of a JSON Lines file or the row groups of a
    Parquet file one task reads; default four units per CPU, 1 to 64 MiB each) and
    `cpus_per_task` (threads each task's Rust code uses) tune the job, never its answer.

    A task whose worker or node dies is run again by Ray (three times at most), and the
    tasks whose objects were lost with a node are run again from their lineage; when Ray
    still loses an object for good, the whole job runs again (twice at most), unless it
    had begun to save into the store.
    """
    started = time.perf_counter()
    seconds: dict = {}

    def lap(stage: str, since: list) -> None:
        now = time.perf_counter()
        seconds[stage] = round(now - since[0], 3)
        since[0] = now

    clock = [started]
    if keep not in ("first", "longest", "shortest"):
        raise ValueError(f"keep must be first, longest or shortest, got '{keep}'")
    # The core's own check of the threshold, before any work.
    _k.measure(b"", b"", b"", b"", float(threshold))
    if fingerprinter is not None and not isinstance(fingerprinter, _own.Fingerprinter):
        raise TypeError("fingerprinter must be a neardup.Fingerprinter")
    if fingerprinter is not None:
        # As `neardup dedup` refuses fingerprint flags with a threshold: they would change
        # only the clusters' `distance` column, never which records are removed.
        raise ValueError("fingerprinter: a threshold decides by the Jaccard similarity of "
                         "word 5-shingles, with the same words for every script; the "
                         "fingerprint options set only the 256-bit fingerprints, which do not decide here")
    if save and against is None:
        raise ValueError("save=True saves into the store given as against=")
    if against is not None:
        if not isinstance(against, _DocumentStore):
            raise TypeError(f"against must be a neardup.DocumentStore, got {type(against).__name__}")
        if closure:
            raise ValueError("against= keeps the stored documents, and a record is removed only "
                             "for one that is its near-duplicate: not with closure=True")
        if float(against.threshold) != float(threshold):
            raise ValueError(f"the store decides at threshold {against.threshold}, not {threshold}: "
                             f"give threshold={against.threshold}")
    if (unit_bytes is not None and int(unit_bytes) < 1) or int(cpus_per_task) < 1:
        raise ValueError("unit_bytes and cpus_per_task must be at least 1")
    if partitions is not None and int(partitions) < 1:
        raise ValueError("partitions must be at least 1")
    dataset = _is_dataset(source)
    paths: list = []
    if not dataset:
        paths = [os.fspath(source)] if isinstance(source, (str, os.PathLike)) else [os.fspath(p) for p in source]
    out_records = _output(deduplicated, "deduplicated")
    out_clusters = _output(clusters, "clusters")
    _check_inputs(paths, out_records)
    _check_inputs(paths, out_clusters)
    if not ray.is_initialized():
        ray.init()

    if dataset:
        ctx = source.context
        before = ctx.execution_options.preserve_order
        # Input order is the Dataset's order, block by block.
        ctx.execution_options.preserve_order = True
        try:
            blocks = source.to_arrow_refs()
        finally:
            ctx.execution_options.preserve_order = before
        units = [_Unit("block", f"block {i}") for i in range(len(blocks))]
        total_bytes = sum(ray.get([_nbytes.remote(b) for b in blocks]))
        kind = "block"
    else:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        units = _plan(paths, format, None if unit_bytes is None else int(unit_bytes), cpus)
        blocks = [None] * len(units)
        total_bytes = sum(u.size for u in units)
        kind = "jsonl" if all(u.kind == "jsonl" for u in units) else "tabular"
        if kind == "tabular" and any(u.kind == "jsonl" for u in units):
            raise ValueError("give JSON Lines or Parquet inputs, not both")
    if len(units) >= 1 << (64 - _LOCAL_BITS):
        raise ValueError(f"{len(units)} units: make unit_bytes larger")
    for out in (out_records, out_clusters):
        if out is not None and out.get("format") is None:
            # A directory of parts, or a Dataset: the input's own format.
            out["format"] = "jsonl" if kind == "jsonl" else "parquet"
        _prepare(out)
    if not units:
        # An empty Dataset: nothing to read, nothing to write but empty outputs.
        if out_clusters is not None and out_clusters["kind"] == "file":
            _ClusterWriter(out_clusters).close()
        if out_records is not None and out_records["kind"] == "file":
            _write_records(out_records, [])
        counts = ("documents", "bytes", "exact_duplicates", "near_duplicates", "clusters",
                  "largest_cluster", "candidates", "verified", "kept", "wordless", "invalid_utf8",
                  "units")
        return Result(clusters=[] if clusters is None else None,
                      deduplicated=ray.data.from_items([]) if deduplicated is None else None,
                      stats={**dict.fromkeys(counts, 0), "seconds": {"total": 0.0}})

    cpus = int(ray.cluster_resources().get("CPU", 1))
    parts = int(partitions) if partitions else max(cpus, math.ceil(total_bytes / (1 << 30)), 1)
    cfg = {
        "text": text_column, "id": id_column, "threshold": float(threshold),
        "fingerprinter": fingerprinter, "threads": int(cpus_per_task), "keep": keep,
        "deduplicated": None if out_records is None else
        {k: v for k, v in out_records.items() if k != "shown"},
        "fault": _fault,
        "against": against is not None,
        "save": bool(save),
    }
    cfg_ref = ray.put(cfg)
    # Every task is retried when its worker or node dies: all are deterministic.
    task = {"num_cpus": int(cpus_per_task), "max_retries": _RETRIES}
    U = len(units)

    # 1. Signatures, shuffled by text hash.
    # Units read from files are spread over the nodes; blocks of a Dataset are read where
    # they are.
    reading = {**task, "scheduling_strategy": "DEFAULT" if dataset else "SPREAD"}
    signed = [
        _sign_task.options(num_returns=1 + parts, **reading).remote(unit, block, u, parts, cfg_ref)
        for u, (unit, block) in enumerate(zip(units, blocks))
    ]
    infos = _wait([s[0] for s in signed])
    lap("signatures", clock)

    # 2. Nodes, and band keys shuffled by (band, key).
    nodes = [
        _nodes_task.options(num_returns=2 + parts, **task).remote(
            p, parts, cfg_ref, *[s[1 + p] for s in signed])
        for p in range(parts)
    ]
    tables = [n[1] for n in nodes]
    node_stats = _wait([n[0] for n in nodes])
    del signed
    lap("nodes", clock)

    # 3. Candidate pairs per bucket, sent to the partition of their first node.
    buckets = [
        _bucket_task.options(num_returns=parts, **task).remote(
            q, parts, cfg_ref, *[n[2 + q] for n in nodes])
        for q in range(parts)
    ]
    if parts == 1:
        buckets = [[b] for b in buckets]
    del nodes

    # 4. Verification where the sketches are.
    def near(pair_lists: list, limit: Optional[float]) -> tuple:
        halves = [
            _near_a_task.options(num_returns=1 + parts, **task).remote(
                p, parts, cfg_ref, tables[p], *[b[p] for b in pair_lists])
            for p in range(parts)
        ]
        found = [
            _near_b_task.options(**task).remote(
                q, cfg_ref, limit, tables[q], *[h[1 + q] for h in halves])
            for q in range(parts)
        ]
        distinct = sum(_wait([h[0] for h in halves]))
        return _concat(_wait(found), _EDGES), distinct

    edges, candidates = near(buckets, float(threshold))
    del buckets
    lap("candidates and verification", clock)

    # 4b. With a store: each node's most similar stored near-duplicate, looked up here.
    stored_ids: list = []
    matched = {"pos": np.empty(0, np.uint64), "part": np.empty(0, np.uint32),
               "len": np.empty(0, np.uint32), "similarity": np.empty(0, np.float32),
               "distance": np.empty(0, np.uint32), "stored": np.empty(0, np.int64)}
    stored_before = len(against) if against is not None else 0
    if against is not None:
        matched, stored_ids = _stored_matches(against, tables)
        lap("store lookups", clock)

    # 5. Assignment, on the driver, by the core.
    graph = np.unique(np.concatenate([edges["a"], edges["b"], matched["pos"]]))
    ai = np.searchsorted(graph, edges["a"])
    bi = np.searchsorted(graph, edges["b"])
    mi = np.searchsorted(graph, matched["pos"])
    lens = np.zeros(len(graph), dtype=np.uint32)
    part_of = np.zeros(len(graph), dtype=np.uint32)
    lens[ai], lens[bi], lens[mi] = edges["len_a"], edges["len_b"], matched["len"]
    part_of[ai], part_of[bi], part_of[mi] = edges["part_a"], edges["part_b"], matched["part"]
    outside = {}
    if against is not None:
        flag = np.zeros(len(graph), dtype=np.uint8)
        osim = np.zeros(len(graph), dtype="<f4")
        odist = np.zeros(len(graph), dtype="<u4")
        flag[mi], osim[mi], odist[mi] = 1, matched["similarity"], matched["distance"]
        outside = {"outside": flag.tobytes(), "outside_similarity": osim.tobytes(),
                   "outside_distance": odist.tobytes()}
    to, sim, dist, known = _k.assign(
        lens.astype("<u4").tobytes(), graph.astype("<u8").tobytes(),
        ai.astype("<u4").tobytes(), bi.astype("<u4").tobytes(),
        edges["similarity"].astype("<f4").tobytes(), edges["distance"].astype("<u4").tobytes(),
        keep, bool(closure), **outside)
    to = np.frombuffer(to, dtype="<u4").astype(np.int64)
    sim = np.frombuffer(sim, dtype="<u4").view("<f4").copy()
    dist = np.frombuffer(dist, dtype="<u4").copy()
    known = np.frombuffer(known, dtype=np.uint8).astype(bool)
    linked = to != np.arange(len(graph))
    # Nodes removed for a stored document go to its position past every record's.
    to_stored = to == 0xFFFFFFFF
    stored_of = np.zeros(len(graph), dtype=np.uint64)
    stored_of[mi] = np.uint64(_STORED) + matched["stored"].astype(np.uint64)
    rep_pos = np.where(to_stored, stored_of, graph[np.where(to_stored, 0, to)])
    if closure and (linked & ~known).any():
        # Members of a component: how near each is to its top, measured as batch does.
        members = np.flatnonzero(linked & ~known)
        tops = to[members]
        pairs = {"a": graph[tops], "b": graph[members], "part_b": part_of[members]}
        pair_lists = [_split(pairs, part_of[tops].astype(np.int64), parts)]
        measured, _ = near(pair_lists, None)
        mi = np.searchsorted(graph, measured["b"])
        sim[mi], dist[mi] = measured["similarity"], measured["distance"]
    lap("assignment", clock)

    # 6. Cluster rows, per unit; pass 2; clusters in order.
    groups = min(parts, U)
    group_of_unit = (np.arange(U) * groups // U).astype(np.int64)
    units_of_group = [np.flatnonzero(group_of_unit == g).tolist() for g in range(groups)]
    # Cluster rows go back to units by group, and to the clusters' assembly by the same
    # contiguous ranges of units (so that ranges in order are clusters in order).
    ranges = groups
    units_ref = ray.put(group_of_unit)
    link_rows = {"pos": graph[linked], "rep": rep_pos[linked], "similarity": sim[linked],
                 "distance": dist[linked]}
    by_part = _split(link_rows, part_of[linked].astype(np.int64), parts)
    leads = np.unique(graph[to[linked & ~to_stored]])
    lead_parts = _split({"pos": leads}, part_of[np.searchsorted(graph, leads)].astype(np.int64), parts)
    expanded = [
        _expand_task.options(num_returns=groups, **task).remote(
            p, cfg_ref, tables[p], by_part[p], lead_parts[p]["pos"], units_ref, groups)
        for p in range(parts)
    ]
    if groups == 1:
        expanded = [[e] for e in expanded]
    regrouped: list = [None] * U
    for g, members in enumerate(units_of_group):
        refs = _regroup_task.options(num_returns=len(members), max_retries=_RETRIES).remote(
            members, *[e[g] for e in expanded])
        for u, ref in zip(members, [refs] if len(members) == 1 else refs):
            regrouped[u] = ref
    del expanded, tables

    # Lines before each JSON Lines unit in its file, for ids `path:line`; rows before
    # each block of a Dataset, for ids that are positions.
    first_line, first_row, seen, total_rows = [], [], {}, 0
    for unit, info in zip(units, infos):
        first_line.append(seen.get(unit.file, 0))
        seen[unit.file] = seen.get(unit.file, 0) + info["lines"]
        first_row.append(total_rows)
        total_rows += info["docs"]
    picked = [
        _pick_task.options(num_returns=2 + ranges, **reading).remote(
            unit, block, u, regrouped[u], cfg_ref, first_line[u], first_row[u],
            units_ref, ranges)
        for u, (unit, block) in enumerate(zip(units, blocks))
    ]
    assembled = [
        _assemble_task.options(max_retries=_RETRIES).remote(*[pk[2 + r] for pk in picked])
        for r in range(ranges)
    ]
    result_records = None
    kept_refs = [pk[0] for pk in picked]
    if out_records is not None:
        if out_records["kind"] == "dataset":
            result_records = ray.data.from_arrow_refs(kept_refs)
        elif out_records["kind"] == "file":
            _write_records(out_records, kept_refs)
        else:
            _wait(kept_refs)
    lap("records", clock)

    counted = 0
    largest = 0
    rows_total = 0
    cluster_list: Optional[list] = [] if out_clusters is not None and out_clusters["kind"] == "list" else None
    writer = _ClusterWriter(out_clusters) if out_clusters is not None and out_clusters["kind"] == "file" else None
    stored_clusters = 0
    removed_for_stored = 0
    try:
        for r, ref in enumerate(assembled):
            part = _wait([ref])[0]
            rows = part["rows"]
            if stored_ids and r == len(assembled) - 1:
                largest = max(largest, _largest_below(rows, _STORED))
                rows, stored_clusters, removed_for_stored = _with_stored_rows(rows, stored_ids)
            else:
                largest = max(largest, part["largest"])
            rows_total += len(rows["doc"])
            if not len(rows["doc"]):
                continue
            lines, count = _k.cluster_lines(
                rows["rep"].astype("<u8").tobytes(), rows["doc"].astype("<u8").tobytes(),
                rows["similarity"].astype("<f4").tobytes(), rows["distance"].astype("<u4").tobytes(),
                rows["id"], counted, _STORED)
            counted += count
            if writer is not None:
                writer.write(lines)
            elif cluster_list is not None:
                cluster_list.extend(json.loads(line) for line in lines.splitlines())
    finally:
        if writer is not None:
            writer.close()
    lap("clusters", clock)
    saved = _save(against, [pk[1] for pk in picked]) if save else None
    if saved is not None:
        lap("save", clock)

    docs = sum(i["docs"] for i in infos)
    removable = rows_total - counted
    if stored_ids:
        # As `neardup dedup --against` counts: clusters of the input's documents only.
        counted -= stored_clusters
    exact = sum(s["docs"] - s["nodes"] for s in node_stats)
    stats = {
        "documents": docs,
        "bytes": sum(i["bytes"] for i in infos),
        "exact_duplicates": exact,
        "near_duplicates": removable - exact,
        "clusters": counted,
        "largest_cluster": largest,
        "candidates": candidates,
        "verified": len(edges["a"]),
        "kept": docs - removable,
        "wordless": sum(s["wordless"] for s in node_stats),
        "invalid_utf8": sum(i["invalid_utf8"] for i in infos),
        "units": U,
        "partitions": parts,
        "seconds": {**seconds, "total": round(time.perf_counter() - started, 3)},
        "settings": {"threshold": float(threshold), "keep": keep, "closure": bool(closure)},
    }
    if against is not None:
        stats["settings"]["store"] = {"stored_before": stored_before,
                                      "removed_for_stored": removed_for_stored}
        if saved is not None:
            stats["settings"]["store"].update(saved=saved[0], refused_by_store=saved[1])
    return Result(clusters=cluster_list, deduplicated=result_records, stats=stats)



def _object_lost(e: BaseException) -> bool:
    """Whether `e` is, or was caused by, an object Ray lost (its node gone) and could not
    rebuild from its lineage, or waited for in vain (no location found): a fault of the
    cluster, never of the input."""
    seen = 0
    while e is not None and seen < 16:
        if isinstance(e, ray.exceptions.ObjectLostError):
            return True
        e, seen = getattr(e, "cause", None) or e.__cause__, seen + 1
    return False


@functools.wraps(_dedup_once)
def dedup(*args: Any, **kwargs: Any) -> Result:
    # Every task is deterministic, and the outputs are written whole again by a new run:
    # when Ray loses an object for good (a node lost while its lineage was being rebuilt
    # can leave a fetch waiting with no location), the job runs again on the nodes left,
    # unless it had begun to save into the store.
    store = kwargs.get("against")
    attempt = 0
    while True:
        before = len(store) if store is not None else 0
        try:
            return _dedup_once(*args, **kwargs)
        except Exception as e:
            changed = store is not None and len(store) != before
            if attempt == _JOB_RETRIES or changed or not _object_lost(e):
                raise
            attempt += 1
            warnings.warn(f"neardup.ray: Ray lost an object it could not rebuild ({type(e).__name__}); "
                          f"running the job again ({attempt + 1} of {_JOB_RETRIES + 1})",
                          RuntimeWarning, stacklevel=2)


def _save(store: "_DocumentStore", refs: list) -> tuple:
    """`save=True`: puts the kept records of every unit (`refs`, in input order) into
    `store`, each only if unique, after refusing (before any write) a kept id that is
    stored or is another kept record's; (saved, refused by the store)."""
    seen: set = set()
    for ref in refs:
        ids = _wait([ref])[0]["id"]
        for name in ids:
            if name in seen:
                raise ValueError(f"save=True: two kept records have the id {name!r}; a store holds "
                                 "one document per id. Nothing was saved")
            seen.add(name)
        taken = store._stored(ids)
        if any(taken):
            name = ids[taken.index(True)]
            raise ValueError(f"save=True: the kept record with id {name!r} has the id of a stored "
                             "document, which saving would replace. Nothing was saved")
    del seen
    saved = offered = 0
    for ref in refs:
        part = _wait([ref])[0]
        offered += len(part["id"])
        saved += store._put_unique(list(zip(part["id"], part["text"])))
    return saved, offered - saved


def _stored_matches(store: "_DocumentStore", tables: list) -> tuple:
    """Each node's most similar stored near-duplicate, a partition at a time: the nodes
    that have one (position, partition, length, similarity, distance, and the number of
    its stored document), and the stored documents' ids, numbered in the order of the
    first nodes matched to them (as `neardup dedup --against` orders their clusters)."""
    pieces, names = [], []
    for p, ref in enumerate(tables):
        t = _wait([ref])[0]
        idx, sim, dist, ids = _k.stored_matches(
            store, t["text_hash"].astype("<u8").tobytes(),
            np.ascontiguousarray(t["sketch"], dtype=np.uint8).tobytes(),
            t["bands"].astype("<u4").tobytes(), t["fingerprint"].astype("<u8").tobytes())
        idx = np.frombuffer(idx, dtype="<u4")
        hit = idx != np.uint32(0xFFFFFFFF)
        pieces.append({
            "pos": t["pos"][hit], "part": np.full(int(hit.sum()), p, dtype=np.uint32),
            "len": t["len"][hit], "similarity": np.frombuffer(sim, dtype="<f4")[hit],
            "distance": np.frombuffer(dist, dtype="<u4")[hit],
            "stored": idx[hit].astype(np.int64) + len(names)})
        names.extend(ids)
    m = {k: np.concatenate([pc[k] for pc in pieces]) for k in pieces[0]} if pieces else {}
    order = np.argsort(m["pos"], kind="stable")
    m = {k: v[order] for k, v in m.items()}
    number: dict = {}
    for i, s in enumerate(m["stored"]):
        number.setdefault(names[int(s)], len(number))
        m["stored"][i] = number[names[int(s)]]
    return m, list(number)


def _with_stored_rows(rows: dict, stored_ids: list) -> tuple:
    """The last range's cluster rows with a row of its own for each stored document that
    records were removed for (as its representative's row), sorted again; how many such
    clusters, and how many records they remove."""
    reps = rows["rep"]
    mine = np.unique(reps[reps >= np.uint64(_STORED)])
    removed = int((reps >= np.uint64(_STORED)).sum())
    own = {"rep": mine, "doc": mine, "similarity": np.ones(len(mine), dtype=np.float32),
           "distance": np.zeros(len(mine), dtype=np.uint32)}
    own_ids = [_json(stored_ids[int(v - np.uint64(_STORED))]) for v in mine]
    merged = _concat([{k: rows[k] for k in _ROWS}, own], _ROWS)
    ids = list(rows["id"]) + own_ids
    # A stored document's row first among its members, as the CLI writes it; the rest by
    # document.
    first = np.where(merged["doc"] >= np.uint64(_STORED), np.uint64(0), merged["doc"] + np.uint64(1))
    order = np.lexsort((first, merged["rep"]))
    merged = {k: v[order] for k, v in merged.items()}
    merged["id"] = [ids[i] for i in order]
    return merged, len(mine), removed


def _largest_below(rows: dict, limit: int) -> int:
    """The largest cluster among `rows` whose representative is below `limit` (those of
    stored documents left out)."""
    reps = rows["rep"][rows["rep"] < np.uint64(limit)]
    if not len(reps):
        return 0
    return int(np.unique(reps, return_counts=True)[1].max())


def _write_records(out: dict, refs: list) -> None:
    """The kept records of every unit, in order, into one file."""
    fs, path = out["fs"], out["path"]
    if out["format"] == "jsonl":
        with fs.open_output_stream(path) as f:
            for ref in refs:
                f.write(_wait([ref])[0])
        return
    writer = None
    try:
        for ref in refs:
            table = _wait([ref])[0]
            if table is None or table.num_columns == 0:
                continue
            if writer is None:
                writer = pq.ParquetWriter(fs.open_output_stream(path), table.schema)
            writer.write_table(table.cast(writer.schema) if table.schema != writer.schema else table)
    finally:
        if writer is not None:
            writer.close()


class _ClusterWriter:
    """Clusters into a JSON Lines or Parquet file, in order."""

    def __init__(self, out: dict) -> None:
        self.out = out
        self.stream = out["fs"].open_output_stream(out["path"])
        self.parquet = None

    def write(self, lines: bytes) -> None:
        if self.out["format"] == "jsonl":
            self.stream.write(lines)
            return
        rows = []
        for line in lines.splitlines():
            c = json.loads(line)
            rows.append(c)
        table = pa.Table.from_pylist(rows)
        if self.parquet is None:
            self.parquet = pq.ParquetWriter(self.stream, table.schema)
        self.parquet.write_table(table.cast(self.parquet.schema))

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
        self.stream.close()


def _main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m neardup.ray`: `neardup dedup`'s options, run as a Ray job (on the
    cluster RAY_ADDRESS or --address names, else on a local Ray)."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(
        prog="python -m neardup.ray",
        description="neardup dedup as a Ray job: the same clusters and records, on a Ray cluster.")
    ap.add_argument("inputs", nargs="+", help="JSON Lines or Parquet files or directories (local, s3://, gs://, ...)")
    ap.add_argument("--clusters", help="write the clusters here (.jsonl or .parquet)")
    ap.add_argument("--deduplicated", help="write the records kept here (.jsonl or .parquet file, or a directory of parts)")
    ap.add_argument("-t", "--threshold", type=float, default=0.8)
    ap.add_argument("--keep", choices=["first", "longest", "shortest"], default="first")
    ap.add_argument("--closure", action="store_true")
    ap.add_argument("--text-field", "--text-column", dest="text", default="text")
    ap.add_argument("--id-field", "--id-column", dest="id", default="id")
    ap.add_argument("--format", choices=["jsonl", "parquet"])
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--unit-bytes", type=int)
    ap.add_argument("--cpus-per-task", type=int, default=1)
    ap.add_argument("--address", help="the Ray cluster (default: RAY_ADDRESS, else a local Ray)")
    ap.add_argument("--stats-json", help="also write the summary as JSON to this file")
    ap.add_argument("-q", "--quiet", action="store_true", help="no summary on standard error")
    args = ap.parse_args(argv)
    ray.init(address=args.address, log_to_driver=False)
    try:
        result = dedup(
            args.inputs, text_column=args.text, id_column=args.id, threshold=args.threshold,
            keep=args.keep, closure=args.closure,
            clusters=args.clusters if args.clusters else False,
            deduplicated=args.deduplicated if args.deduplicated else False,
            format=args.format, partitions=args.partitions, unit_bytes=args.unit_bytes,
            cpus_per_task=args.cpus_per_task)
    except (ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        ray.shutdown()
    if args.stats_json:
        with open(args.stats_json, "w", encoding="utf-8") as f:
            json.dump(result.stats, f, indent=2)
    if not args.quiet:
        s = result.stats
        print(
            f"neardup.ray: {s['documents']} documents, {s['bytes'] / 1e6:.1f} MB in "
            f"{s['seconds']['total']:.2f} s on {s['units']} units, {s['partitions']} partitions\n"
            f"  exact duplicates  {s['exact_duplicates']}\n"
            f"  near-duplicates   {s['near_duplicates']}\n"
            f"  clusters          {s['clusters']} (largest {s['largest_cluster']})\n"
            f"  kept              {s['kept']}",
            file=sys.stderr)
    return 0


if __name__ == "__main__":
    # Run from the module proper (not this __main__ copy), whose tasks Ray pickles by name.
    import sys

    from neardup.ray import _main as main

    sys.exit(main())

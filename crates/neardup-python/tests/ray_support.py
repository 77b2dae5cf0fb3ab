"""What the Ray tests share: the oracle (the `neardup` CLI on one machine) and inputs
built to stress the job (ranges that split files, records without ids, blank lines,
CRLF, invalid UTF-8, exact copies)."""

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLANTED = ROOT / "crates" / "neardup-cli" / "tests" / "fixtures" / "planted.jsonl"
KJV = ROOT / "examples" / "kjv.jsonl"


def import_ray():
    """Ray, or a skip when it is not installed; CI sets NEARDUP_REQUIRE_RAY=1, so that a
    missing Ray fails there instead of skipping."""
    if os.environ.get("NEARDUP_REQUIRE_RAY") == "1":
        import ray

        return ray
    return pytest.importorskip("ray")


def cli_binary() -> Path:
    """The `neardup` binary: $NEARDUP_CLI, or the newest of the workspace's builds."""
    if os.environ.get("NEARDUP_CLI"):
        return Path(os.environ["NEARDUP_CLI"])
    built = [p for p in (ROOT / "target" / "debug" / "neardup", ROOT / "target" / "release" / "neardup") if p.exists()]
    if not built:
        pytest.fail("the neardup CLI is the oracle of these tests: cargo build -p neardup-cli, or set NEARDUP_CLI")
    return max(built, key=lambda p: p.stat().st_mtime)


def cli_dedup(inputs, tmp: Path, *args) -> tuple:
    """`neardup dedup --estimate` on one machine (Ray decides every pair on the sketches'
    estimate, as --estimate does): the bytes of its --clusters and --deduplicated."""
    clusters, kept = tmp / "cli-clusters.jsonl", tmp / "cli-deduplicated.jsonl"
    inputs = [str(i) for i in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
    subprocess.run(
        [str(cli_binary()), "dedup", *inputs, "--clusters", str(clusters), "--deduplicated", str(kept), "-q", "--estimate", *args],
        check=True,
    )
    return clusters.read_bytes(), kept.read_bytes()


def cli_args(threshold=0.8, keep="first", closure=False) -> list:
    return ["--threshold", str(threshold), "--keep", keep] + (["--closure"] if closure else [])


def tricky_lines(n=600) -> bytes:
    """Planted documents, made hard: some without ids (their ids are `path:line`), ids
    that are numbers and objects, blank and white-space lines, CRLF endings, invalid UTF-8,
    exact copies, and no newline at the end, after a CR."""
    src = PLANTED.read_bytes().splitlines()
    out = []
    for i, line in enumerate(src[:n]):
        d = json.loads(line)
        if i % 7 == 0:
            del d["id"]
        elif i % 11 == 0:
            d["id"] = i
        elif i % 13 == 0:
            d["id"] = {"b": [1, 2], "a": "x"}
        line = json.dumps(d, ensure_ascii=(i % 2 == 0)).encode()
        if i % 17 == 0:
            line = line.replace(b'"text": "', b'"text": "\xff\xfe ', 1)
        if i % 5 == 0:
            line += b"\r"
        out.append(line)
        if i % 9 == 0:
            out.append(b"")
        if i % 23 == 0:
            out.append(b"   \t")
        if i % 31 == 0:
            out.append(line)
    # At the very end a CR with no LF after it: a line end, dropped as from a CRLF (as
    # neardup dedup reads it), in a record that is kept.
    out.append(b'{"id": "last", "text": "a closing record that nothing else in the file repeats"}\r')
    return b"\n".join(out)


def write_tricky(tmp: Path) -> dict:
    """The tricky lines as JSON Lines, gzip'd JSON Lines, and Parquet (ids that are
    objects left out: Parquet ids are strings here, nulls for the missing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tricky_lines()
    paths = {"jsonl": tmp / "tricky.jsonl", "gz": tmp / "tricky.jsonl.gz", "parquet": tmp / "tricky.parquet"}
    paths["jsonl"].write_bytes(data)
    paths["gz"].write_bytes(gzip.compress(data))
    rows = [json.loads(line) for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    ids = [r.get("id") for r in rows]
    ids = [None if i is None or isinstance(i, dict) else str(i) for i in ids]
    table = pa.table({"text": [r["text"] for r in rows], "id": ids, "n": list(range(len(rows)))})
    pq.write_table(table, paths["parquet"], row_group_size=50)
    return paths

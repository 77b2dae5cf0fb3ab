"""neardup.ray on a local Ray (2 CPUs): its clusters and records are, byte for byte,
those of `neardup dedup` on one machine, whatever the units, partitions and settings."""

import json
import subprocess

import pytest

from ray_support import KJV, PLANTED, cli_args, cli_binary, cli_dedup, import_ray, write_tricky

ray = import_ray()
import neardup  # noqa: E402
import neardup.ray as nray  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def ray_dedup(source, tmp, **kw):
    """neardup.ray's clusters and deduplicated records, written as the CLI writes them."""
    clusters, kept = tmp / "ray-clusters.jsonl", tmp / "ray-deduplicated.jsonl"
    result = nray.dedup(source, clusters=str(clusters), deduplicated=str(kept), **kw)
    return clusters.read_bytes(), kept.read_bytes(), result


# Settings across the decision (threshold, keep, closure) and the job's cutting of the
# input (units of a few hundred bytes to whole files, 1 to 5 partitions).
SETTINGS = [
    dict(threshold=0.8, keep="first", closure=False, unit_bytes=64 << 20, partitions=None),
    dict(threshold=0.8, keep="first", closure=False, unit_bytes=200_000, partitions=3),
    dict(threshold=0.7, keep="longest", closure=False, unit_bytes=1 << 20, partitions=2),
    dict(threshold=0.9, keep="shortest", closure=True, unit_bytes=300_000, partitions=5),
    dict(threshold=0.5, keep="first", closure=True, unit_bytes=64 << 20, partitions=1),
]


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: f"{s['threshold']}-{s['keep']}-{s['closure']}-{s['partitions']}")
def test_planted_equals_cli(tmp_path, s):
    want = cli_dedup(PLANTED, tmp_path, *cli_args(s["threshold"], s["keep"], s["closure"]))
    clusters, kept, result = ray_dedup(PLANTED, tmp_path, **s)
    assert clusters == want[0]
    assert kept == want[1]
    assert result.stats["clusters"] == len(want[0].splitlines()) > 100
    assert result.stats["kept"] == len(want[1].splitlines())


@pytest.mark.parametrize("threshold", [0.8, 0.5, 0.3])
def test_kjv_equals_cli(tmp_path, threshold):
    # The Bible retells passages (Kings and Chronicles, Psalms 14 and 53): clusters at
    # lower thresholds, none at 0.8.
    want = cli_dedup(KJV, tmp_path, *cli_args(threshold))
    clusters, kept, _ = ray_dedup(KJV, tmp_path, threshold=threshold, unit_bytes=500_000, partitions=3)
    assert (clusters, kept) == want
    assert threshold == 0.8 or clusters


def write_crowded(path):
    """Two templates stored 300 and 100 times, each copy with a word of its own and some
    with a few words more, and unrelated texts: band keys shared by more than 64 nodes,
    whose runs are led (`neardup.batch::RUN_LEADERS`)."""
    rng = __import__("random").Random(7)
    templates = [[f"w{rng.randrange(5000)}" for _ in range(200)] for _ in range(2)]
    with open(path, "w") as f:
        for t, copies in ((0, 300), (1, 100)):
            for i in range(copies):
                words = list(templates[t])
                words.insert((i * 7) % 200, f"copy{t}x{i}")
                words += [f"tail{k}" for k in range((i * 13) % 6)]
                f.write(json.dumps({"id": f"t{t}-{i}", "text": " ".join(words)}) + "\n")
        for u in range(3):
            text = " ".join(f"w{rng.randrange(5000)}" for _ in range(200))
            f.write(json.dumps({"id": f"u{u}", "text": text}) + "\n")


@pytest.mark.parametrize("keep", ["first", "longest", "shortest"])
def test_crowded_keys_equal_cli(tmp_path, keep):
    corpus = tmp_path / "crowded.jsonl"
    write_crowded(corpus)
    want = cli_dedup(corpus, tmp_path, *cli_args(0.8, keep))
    clusters, kept, _ = ray_dedup(corpus, tmp_path, threshold=0.8, keep=keep, unit_bytes=100_000,
                                  partitions=3)
    assert (clusters, kept) == want
    # One cluster a template.
    assert len(clusters.splitlines()) == 2
    # And in process, as the CLI decides.
    records = [json.loads(line) for line in corpus.read_text().splitlines()]
    inproc = neardup.dedup([(r["id"], r["text"]) for r in records], keep=keep, threshold=0.8, exact=False)
    listed = [json.loads(line) for line in clusters.splitlines()]
    assert inproc == [[c["representative"]] + [m["id"] for m in c["members"] if m["id"] != c["representative"]]
                      for c in listed]


@pytest.mark.parametrize("partitions", [1, 3])
def test_against_a_store_equals_cli(tmp_path, partitions):
    """`against=` removes what `neardup dedup --against` removes, clusters of stored
    documents included, byte for byte."""
    lines = PLANTED.read_bytes().splitlines(keepends=True)
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_bytes(b"".join(lines[: len(lines) // 2]))
    new.write_bytes(b"".join(lines[len(lines) // 2:]))
    store = tmp_path / "store"
    subprocess.run([str(cli_binary()), "dedup", str(old), "--save", str(store), "-q"], check=True)
    want = cli_dedup(new, tmp_path, "--against", str(store))
    assert want[0].count(b'"stored":true') > 10
    with neardup.DocumentStore.open(store) as s:
        clusters, kept, result = ray_dedup(new, tmp_path, against=s, unit_bytes=100_000,
                                           partitions=partitions)
        assert (clusters, kept) == want
        assert result.stats["settings"]["store"]["removed_for_stored"] > 10
        assert result.stats["kept"] == len(want[1].splitlines())
        with pytest.raises(ValueError, match="closure"):
            nray.dedup(new, against=s, closure=True)
        with pytest.raises(ValueError, match="threshold=0.8"):
            nray.dedup(new, against=s, threshold=0.7)
    with pytest.raises(TypeError, match="DocumentStore"):
        nray.dedup(new, against=str(store))


@pytest.mark.parametrize("kind", ["planted", "parquet"])
def test_save_adds_what_cli_save_adds(tmp_path, kind):
    """`save=True` puts into the store the records `neardup dedup --save` puts into a copy
    of it: the same count saved and refused, the same ids stored (ids `path:row` too)."""
    if kind == "planted":
        lines = PLANTED.read_bytes().splitlines(keepends=True)
        old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
        old.write_bytes(b"".join(lines[: len(lines) // 2]))
        new.write_bytes(b"".join(lines[len(lines) // 2:]))
    else:
        old, new = tmp_path / "old.jsonl", write_tricky(tmp_path)["parquet"]
        old.write_text(json.dumps({"id": "elsewhere", "text": "a record unlike any of the tricky ones"}) + "\n")
    cli = str(cli_binary())
    stores = {who: tmp_path / f"{who}-store" for who in ("cli", "ray")}
    for store in stores.values():
        subprocess.run([cli, "dedup", str(old), "--save", str(store), "-q"], check=True)
    stats, kept = tmp_path / "stats.json", tmp_path / "kept.jsonl"
    subprocess.run([cli, "dedup", str(new), "--save", str(stores["cli"]), "--deduplicated", str(kept),
                    "--stats-json", str(stats), "-q"], check=True)
    want = json.loads(stats.read_text())["settings"]["store"]
    assert want["saved"] > 100
    with neardup.DocumentStore.open(stores["ray"]) as s:
        before = len(s)
        result = nray.dedup(new, against=s, save=True, clusters=False, deduplicated=False,
                            unit_bytes=20_000, partitions=3)
        got = result.stats["settings"]["store"]
        assert (got["saved"], got["refused_by_store"]) == (want["saved"], want["refused_by_store"])
        assert len(s) == before + want["saved"]
        ray_len = len(s)
    with neardup.DocumentStore.open(stores["cli"]) as c:
        assert len(c) == ray_len
        # The ids the CLI stored are the ids Ray stored: those of the kept records.
        kept_ids = [json.loads(line).get("id") for line in kept.read_text().splitlines()]
        named = [i if isinstance(i, str) else json.dumps(i) for i in kept_ids if i is not None]
        assert named and all(i in c for i in named)
        # Rows without an id, stored as `path:row`.
        rows = [f"{new}:{i}" for i in range(1, 700) if f"{new}:{i}" in c]
        assert (kind == "parquet") == bool(rows)
    with neardup.DocumentStore.open(stores["ray"]) as s:
        assert all(i in s for i in named + rows)


def test_save_refuses_before_writing(tmp_path):
    """A kept record named like a stored document, or like another kept record, stops
    `save=True` before anything is saved; `save=True` needs `against=`."""
    store = tmp_path / "store"
    subprocess.run([str(cli_binary()), "dedup", str(PLANTED), "--save", str(store), "-q"], check=True)
    fresh = ["a text of its own about lighthouses and the keepers who kept them lit",
             "another text entirely, on the migration of eels to the Sargasso Sea"]
    taken, twice = tmp_path / "taken.jsonl", tmp_path / "twice.jsonl"
    taken.write_text(json.dumps({"id": "new/1", "text": fresh[0]}) + "\n"
                     + json.dumps({"id": "doc/0", "text": fresh[1]}) + "\n")
    twice.write_text("".join(json.dumps({"id": "new/1", "text": t}) + "\n" for t in fresh))
    with neardup.DocumentStore.open(store) as s:
        before = len(s)
        with pytest.raises(ValueError, match="'doc/0' has the id of a stored document"):
            nray.dedup(taken, against=s, save=True, clusters=False, deduplicated=False)
        with pytest.raises(ValueError, match="two kept records have the id 'new/1'"):
            nray.dedup(twice, against=s, save=True, clusters=False, deduplicated=False)
        assert len(s) == before and "new/1" not in s
    with pytest.raises(ValueError, match="against="):
        nray.dedup(taken, save=True, clusters=False, deduplicated=False)



def lose_once(mark, stage):
    """A hook that, the first time `stage` runs, fails its task as Ray fails a task whose
    input it lost for good (an object no node holds and its lineage could not rebuild)."""

    def hook(s, index):
        import os

        import ray

        if s != stage:
            return
        try:
            os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        raise ray.exceptions.ObjectFetchTimedOutError("00" * 28, None, "a test hook")

    return hook


@pytest.mark.parametrize("stage", ["nodes", "near", "pick"])
def test_an_object_lost_for_good_runs_the_job_again(tmp_path, stage):
    """Once Ray gives up on an object, the job runs again (with a warning) and answers as
    if nothing had happened."""
    want = cli_dedup(PLANTED, tmp_path, *cli_args(0.8))
    mark = tmp_path / "lost"
    with pytest.warns(RuntimeWarning, match=r"running the job again \(2 of 3\)"):
        clusters, kept, _ = ray_dedup(PLANTED, tmp_path, unit_bytes=200_000, partitions=2,
                                      _fault=lose_once(str(mark), stage))
    assert mark.exists()
    assert (clusters, kept) == want


def test_a_lost_object_is_not_retried_once_the_store_changed(tmp_path, monkeypatch):
    """With `save=True`, an object lost after a document was saved is raised, not run
    again: a second run would find its own saved documents stored."""
    store = tmp_path / "store"
    lines = PLANTED.read_bytes().splitlines(keepends=True)
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_bytes(b"".join(lines[: len(lines) // 2]))
    new.write_bytes(b"".join(lines[len(lines) // 2:]))
    subprocess.run([str(cli_binary()), "dedup", str(old), "--save", str(store), "-q"], check=True)
    runs = []

    def save_one_then_lose(s, refs):
        runs.append(1)
        part = ray.get(refs[0])
        s._put_unique([(part["id"][0], part["text"][0])])
        raise ray.exceptions.ObjectLostError("00" * 28, None, "a test")

    monkeypatch.setattr(nray, "_save", save_one_then_lose)
    with neardup.DocumentStore.open(store) as s:
        before = len(s)
        with pytest.raises(ray.exceptions.ObjectLostError):
            nray.dedup(new, against=s, save=True, clusters=False, deduplicated=False,
                       unit_bytes=20_000, partitions=2)
        assert len(runs) == 1 and len(s) == before + 1

@pytest.mark.parametrize("unit_bytes", [64 << 20, 20_000, 3_333])
@pytest.mark.parametrize("kind", ["jsonl", "gz", "parquet"])
def test_tricky_inputs_equal_cli(tmp_path, kind, unit_bytes):
    """Ranges that cut lines, ids `path:line` counted across ranges, blank lines, CRLF,
    invalid UTF-8, exact copies; gzip (one unit); Parquet row groups, null ids
    (`path:row`), records written as {"id", "text"}."""
    path = write_tricky(tmp_path)[kind]
    want = cli_dedup(path, tmp_path)
    clusters, kept, result = ray_dedup(path, tmp_path, unit_bytes=unit_bytes, partitions=3)
    assert clusters == want[0]
    assert kept == want[1]
    assert result.stats["exact_duplicates"] > 0
    assert f'{path.name}:1"'.encode() in clusters
    if kind != "parquet":
        assert result.stats["invalid_utf8"] > 0


def test_directories_and_parts(tmp_path):
    """A directory read as the CLI reads it (recursively, in name order), and the kept
    records written as one part per unit, which together are the CLI's."""
    lines = PLANTED.read_bytes().splitlines(keepends=True)
    inputs = tmp_path / "in"
    (inputs / "b").mkdir(parents=True)
    (inputs / "a.jsonl").write_bytes(b"".join(lines[:500]))
    (inputs / "b" / "c.jsonl").write_bytes(b"".join(lines[500:900]))
    (inputs / "b-c.jsonl").write_bytes(b"".join(lines[900:]))
    want = cli_dedup(inputs, tmp_path)
    parts = tmp_path / "parts"
    result = nray.dedup(str(inputs), clusters=str(tmp_path / "c.jsonl"), deduplicated=str(parts), unit_bytes=400_000)
    assert (tmp_path / "c.jsonl").read_bytes() == want[0]
    names = sorted(p.name for p in parts.iterdir())
    assert len(names) == result.stats["units"] > 3
    assert b"".join((parts / n).read_bytes() for n in names) == want[1]


def test_returned_results_and_parquet_outputs(tmp_path):
    import pyarrow.parquet as pq

    want = cli_dedup(PLANTED, tmp_path)
    result = nray.dedup(str(PLANTED), unit_bytes=500_000)
    assert result.clusters == [json.loads(line) for line in want[0].splitlines()]
    kept_ids = [json.loads(line)["id"] for line in want[1].splitlines()]
    assert [row["id"] for row in result.deduplicated.take_all()] == kept_ids
    nray.dedup(str(PLANTED), clusters=str(tmp_path / "c.parquet"), deduplicated=str(tmp_path / "d.parquet"))
    assert pq.read_table(tmp_path / "d.parquet").column("id").to_pylist() == kept_ids
    clusters = pq.read_table(tmp_path / "c.parquet").to_pylist()
    assert clusters == result.clusters
    assert nray.dedup(str(PLANTED), clusters=False, deduplicated=False).stats["clusters"] == len(clusters)


def test_dataset_equals_in_process_dedup():
    """A Ray Dataset in many blocks: clusters as neardup.dedup finds them in process, kept
    rows in order with every column; rows without an id column are named by position."""
    import pyarrow as pa

    records = [json.loads(line) for line in PLANTED.read_bytes().splitlines()]
    table = pa.table({"text": [r["text"] for r in records], "key": [r["id"] for r in records], "n": list(range(len(records)))})
    ds = ray.data.from_arrow(table).repartition(7)
    for keep in ("first", "longest"):
        result = nray.dedup(ds, id_column="key", keep=keep, threshold=0.7)
        # Ray decides on the sketches' estimates: exact=False.
        want = neardup.dedup([(r["id"], r["text"]) for r in records], keep=keep, threshold=0.7, exact=False)
        got = [[c["representative"]] + [m["id"] for m in c["members"] if m["id"] != c["representative"]] for c in result.clusters]
        assert got == want
        removed = {i for c in want for i in c[1:]}
        rows = result.deduplicated.take_all()
        assert [r["key"] for r in rows] == [r["id"] for r in records if r["id"] not in removed]
        assert set(rows[0]) == {"text", "key", "n"}
    by_position = nray.dedup(ds.drop_columns(["key"]), threshold=0.7)
    want = neardup.dedup(list(enumerate(r["text"] for r in records)), threshold=0.7, exact=False)
    assert [[c["representative"]] + [m["id"] for m in c["members"][1:]] for c in by_position.clusters] == want


def test_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": 1, "text": "fine"}\n\n{"id": 2, "text": "fine too"}\n{"id": 3, "text": \n')
    with pytest.raises(ValueError, match=r"bad.jsonl:4: not valid JSON"):
        nray.dedup(str(bad))
    # The line number counts the lines of the ranges before.
    with pytest.raises(ValueError, match=r"bad.jsonl:4: not valid JSON"):
        nray.dedup(str(bad), unit_bytes=30)
    bad.write_bytes(b'{"id": 1, "text": 5}\n')
    with pytest.raises(ValueError, match=r'bad.jsonl:1: field "text" is not a string but a number'):
        nray.dedup(str(bad))
    with pytest.raises(ValueError, match=r'no "body" field'):
        nray.dedup(str(PLANTED), text_column="body")
    parquet = write_tricky(tmp_path)["parquet"]
    with pytest.raises(ValueError, match=r'tricky.parquet: no column "body"'):
        nray.dedup(str(parquet), text_column="body")
    with pytest.raises(ValueError, match="keep must be first, longest or shortest"):
        nray.dedup(str(PLANTED), keep="best")
    with pytest.raises(ValueError, match="threshold"):
        nray.dedup(str(PLANTED), threshold=1.5)
    # As `neardup dedup` refuses fingerprint flags with a threshold: they decide nothing.
    with pytest.raises(ValueError, match="fingerprinter: a threshold decides"):
        nray.dedup(str(PLANTED), fingerprinter=neardup.Fingerprinter(tokenizer="char:5"))
    with pytest.raises(FileNotFoundError, match="cannot read input"):
        nray.dedup(str(tmp_path / "missing.jsonl"))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="reads JSON Lines"):
        nray.dedup(str(tmp_path / "notes.txt"))
    with pytest.raises(ValueError, match="is an input"):
        nray.dedup(str(tmp_path), deduplicated=str(tmp_path / "out"))
    with pytest.raises(ValueError, match="clusters must be written to a .jsonl or .parquet file"):
        nray.dedup(str(PLANTED), clusters=str(tmp_path / "clusters"))


def test_units_hold_every_line_once(tmp_path):
    """However a file is cut into units and chunks, the units' chunks are whole lines and
    together the file, each line once, in order (no Ray: the reading alone)."""
    import random

    rng = random.Random(7)
    path = tmp_path / "lines.jsonl"
    for _ in range(300):
        lines = [b"x" * rng.randrange(0, 12) for _ in range(rng.randrange(0, 15))]
        data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        path.write_bytes(data)
        for unit_bytes in (1, 2, 3, 7, 40):
            chunk = rng.choice([1, 3, 64])
            units = nray._plan([str(path)], "jsonl", unit_bytes, 1)
            chunks = [c for u in units for c in nray._line_chunks(u, chunk)]
            assert b"".join(chunks) == data, (data, unit_bytes, chunk)
            assert all(c.endswith(b"\n") for c in chunks[:-1])

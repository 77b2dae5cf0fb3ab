"""DocumentStore over a data directory (the embedded store of ``neardup serve --data``):
its match decisions against ``neardup.dedup`` (the batch dedup, keep first), a store made
here read by ``neardup serve`` and by a reopen, and its errors. The Redis backend is in
test_redis.py."""

import json
import os
import random
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import neardup
from test_neardup import PARA_A, PARA_B, edit

OTHER = ("A recipe for bread: mix flour, water, salt and yeast, knead for ten minutes, "
         "let it rise for an hour, shape it, and bake it in a hot oven until golden.")


def planted_records():
    """The planted near-duplicates of test_neardup's dedup test (pairs measured there:
    a~a1 0.780, a~a2 0.753, a1~a2 0.583, b~b1 0.877), then random word edits of both
    paragraphs, some a few words away and some many, so that at 0.8 and 0.6 there are
    documents on both sides of the threshold and some near only to a removed one."""
    a1 = edit(PARA_A, ("Tuesday", "Wednesday"), ("long", "lengthy"))
    a2 = edit(PARA_A, ("roof", "roofs"), ("winter storms", "autumn storms"),
              ("quietly", "in peace"))
    b1 = edit(PARA_B, ("hundreds", "thousands"))
    records = [("a1", a1), ("a", PARA_A), ("x", OTHER), ("b", PARA_B), ("empty", ""),
               ("a2", a2), ("empty2", ""), ("b1", b1), ("b-copy", PARA_B)]
    rng = random.Random(14)
    for n in range(40):
        words = (PARA_A if n % 2 else PARA_B).split()
        for _ in range(rng.choice([1, 2, 3, 5, 8, 12])):
            words[rng.randrange(len(words))] = f"w{rng.randrange(1000)}"
        records.append((f"e{n}", " ".join(words)))
    return records


def kept_by_dedup(records, threshold):
    """The ids `dedup` keeps, in input order: all but the removed (each cluster's tail)."""
    # A store decides on the sketches' estimates: so does exact=False.
    removed = {i for c in neardup.dedup(records, threshold=threshold, exact=False) for i in c[1:]}
    return [i for i, _ in records if i not in removed]


@pytest.mark.parametrize("threshold", [0.8, 0.6])
def test_unique_puts_keep_what_dedup_keeps(tmp_path, threshold):
    records = planted_records()
    kept = kept_by_dedup(records, threshold)
    # Not a vacuous comparison: the threshold removes some documents and keeps others.
    assert 2 < len(kept) < len(records) - 2
    inserted = []
    with neardup.DocumentStore.create(tmp_path / "docs", threshold=threshold) as store:
        assert store.threshold == threshold and not store.paragraphs
        for id, text in records:
            out = store.put(id, text, only_if_unique=True)
            # Refused exactly when it has a stored near-duplicate, which it names.
            assert out["inserted"] == (not out["matches"]), (id, out)
            assert not out["replaced"]
            for match, similarity in out["matches"]:
                assert match in inserted and similarity >= threshold
            if out["inserted"]:
                inserted.append(id)
        assert inserted == kept
        assert len(store) == len(kept)
        assert all(id in store for id in kept)
        assert not any(id in store for id, _ in records if id not in kept)


@pytest.mark.parametrize("threshold", [0.8, 0.6])
def test_dedup_against_a_store_is_dedup_of_the_union(tmp_path, threshold):
    """`dedup(new, against=store)` after `dedup(old, against=store, save=True)` into an
    empty store removes what `dedup(old + new)` removes of `new`, each record with the
    union's representative; then saving `new` stores exactly what is kept."""
    records = planted_records()
    records += [(f"r{i}", t) for i, (_, t) in enumerate(records)][::3]
    old, new = records[: len(records) // 2], records[len(records) // 2:]
    union = neardup.dedup(records, threshold=threshold, exact=False)
    new_ids = {i for i, _ in new}
    want = {m: c[0] for c in union for m in c[1:] if m in new_ids}
    assert len(want) > 5 and any(rep not in new_ids for rep in want.values())
    with neardup.DocumentStore.create(tmp_path / "docs", threshold=threshold) as store:
        neardup.dedup(old, against=store, save=True)
        assert len(store) == len(kept_by_dedup(old, threshold))
        got = {m: c[0] for c in neardup.dedup(new, against=store) for m in c[1:]}
        assert got == want
        kept_new = [i for i, _ in new if i not in want]
        before = len(store)
        neardup.dedup(new, against=store, save=True, threshold=threshold)
        assert len(store) == before + len(kept_new)
        # Every record is now stored or a near-duplicate of a stored one.
        removed = {m for c in neardup.dedup(records, against=store) for m in c[1:]}
        assert removed == {i for i, _ in records}


def test_dedup_against_refuses_what_a_store_cannot_decide(tmp_path):
    records = planted_records()
    with neardup.DocumentStore.create(tmp_path / "docs", threshold=0.8) as store:
        with pytest.raises(ValueError, match="threshold=0.8"):
            neardup.dedup(records, against=store, threshold=0.7)
        with pytest.raises(ValueError, match="distance= or closure"):
            neardup.dedup(records, against=store, closure=True)
        with pytest.raises(ValueError, match="distance= or closure"):
            neardup.dedup(records, against=store, distance=10)
        with pytest.raises(ValueError, match="against="):
            neardup.dedup(records, save=True)
        store.put("x", PARA_A)
        # A kept record under a stored id, or two kept records under one id: nothing saved.
        with pytest.raises(ValueError, match="Nothing was saved"):
            neardup.dedup([("y", OTHER), ("x", PARA_B)], against=store, save=True)
        with pytest.raises(ValueError, match=r"records\[0\] and records\[1\]"):
            neardup.dedup([("y", OTHER), ("y", PARA_B)], against=store, save=True)
        with pytest.raises(TypeError, match="must be a str"):
            neardup.dedup([(7, OTHER)], against=store, save=True)
        assert len(store) == 1
        # A removed record's id may be a stored one: it is not saved.
        assert neardup.dedup([("x", PARA_A), ("y", OTHER)], against=store, save=True) == \
            [["x", "x"]]
        assert len(store) == 2 and [i for i, _ in store.check(OTHER)] == ["y"]


def test_reopened_and_served_stores_answer_as_the_one_made(tmp_path):
    path = tmp_path / "docs"
    records = planted_records()
    store = neardup.DocumentStore.create(path, threshold=0.7, paragraphs=True)
    assert store.put_many(records) == len(records)
    queries = [text for _, text in records] + [edit(PARA_A, ("books", "novels")), "nothing"]
    answers = [store.check(q) for q in queries]
    # Every stored text finds itself at similarity 1 (there are no ids twice).
    for (id, _), found in zip(records, answers):
        assert (id, 1.0) in found
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.check("x")
    assert len(store) == 0

    with neardup.DocumentStore.open(path) as again:
        assert (again.threshold, again.paragraphs, again.path) == (0.7, True, path)
        assert len(again) == len(records)
        assert [again.check(q) for q in queries] == answers

    cli = os.environ.get("NEARDUP_CLI") or str(
        Path(__file__).resolve().parents[3] / "target" / "debug" / "neardup")
    if not os.path.exists(cli):
        pytest.skip(f"no neardup binary at {cli} (set NEARDUP_CLI)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([cli, "serve", "--data", str(path), "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def call(method, route, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=20) as r:
            return json.loads(r.read() or b"null")

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                assert time.monotonic() < deadline, "neardup serve did not start"
                time.sleep(0.05)
        for q, found in zip(queries, answers):
            got = call("POST", "/v1/check", {"text": q})["matches"]
            # The service rounds similarities to 3 decimals (MatchJson): within half of
            # the last place of the one the store gives (plus f32 slack).
            assert [m["id"] for m in got] == [i for i, _ in found]
            assert [m["similarity"] for m in got] == pytest.approx([s for _, s in found],
                                                                   abs=5e-4 + 1e-6)
        # And the other way: a put through the service is seen here after it stops.
        out = call("PUT", "/v1/documents/served", {"text": queries[-2], "only_if_unique": True})
        assert out["inserted"] is False and out["matches"]
        call("PUT", "/v1/documents/served", {"text": "served text " * 10})
    finally:
        server.terminate()
        server.wait(timeout=30)
    with neardup.DocumentStore.open(path) as again:
        assert "served" in again and len(again) == len(records) + 1
        assert again.check("served text " * 10) == [("served", 1.0)]


def test_delete_ttl_and_sweep(tmp_path):
    with neardup.DocumentStore.create(tmp_path / "docs") as store:
        assert store.put("a", PARA_A)["inserted"]
        assert store.put("a", PARA_B)["replaced"]
        assert store.check(PARA_A) == [] and store.check(PARA_B) == [("a", 1.0)]
        store.put("gone", OTHER, ttl=0)
        # Expired at once: not found, counted until swept.
        assert "gone" not in store and store.check(OTHER) == [] and len(store) == 2
        assert store.sweep() == 1 and len(store) == 1
        assert store.delete("a") and not store.delete("a") and len(store) == 0
        assert repr(store) == f"DocumentStore('{tmp_path / 'docs'}', threshold=0.8, paragraphs=False)"
        assert store.namespace is None


def test_a_crowded_key_is_said(tmp_path):
    # 64 copies are read whole; past them a band key holds more than a check reads of it
    # (64), and both the check and a put say so. A text sharing no key is whole.
    with neardup.DocumentStore.create(tmp_path / "docs") as store:
        assert store.put_many([(f"c{i}", PARA_A) for i in range(64)]) == 64
        whole = store.check(PARA_A)
        assert isinstance(whole, list) and isinstance(whole, neardup.Matches)
        assert len(whole) == 64 and whole.partial is False
        assert "partial" not in store.put("c64", PARA_A)
        store.put_many([(f"c{i}", PARA_A) for i in range(65, 300)])
        crowded = store.check(PARA_A)
        assert crowded.partial is True and 64 <= len(crowded) < 300
        assert all(similarity == 1.0 for _, similarity in crowded)
        assert store.put("c300", PARA_A)["partial"] is True
        other = store.check(OTHER)
        assert other == [] and other.partial is False
        assert "partial" not in store.put("x", OTHER)


def test_errors_name_the_path(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(neardup.NotAStoreError, match=str(missing)) as e:
        neardup.DocumentStore.open(missing)
    assert isinstance(e.value, FileNotFoundError)
    # A fingerprint store is not a document store, and the other way round.
    fps = tmp_path / "fps"
    neardup.FingerprintStore.create(fps).close()
    with pytest.raises(neardup.ForeignStoreError, match="fingerprint store") as e:
        neardup.DocumentStore.open(fps)
    assert str(fps) in str(e.value) and isinstance(e.value, ValueError)
    docs = tmp_path / "docs"
    store = neardup.DocumentStore.create(docs)
    with pytest.raises(neardup.StoreError, match=str(docs)):
        neardup.FingerprintStore.open(docs)
    # One holder at a time, and no second store over the first.
    with pytest.raises(neardup.StoreError, match="in use"):
        neardup.DocumentStore.open(docs)
    store.close()
    with pytest.raises(neardup.StoreExistsError, match=str(docs)):
        neardup.DocumentStore.create(docs)
    with pytest.raises(ValueError, match="threshold"):
        neardup.DocumentStore.create(tmp_path / "t", threshold=1.5)
    assert not (tmp_path / "t").exists()
    with pytest.raises(TypeError):
        neardup.DocumentStore.create(5)
    with pytest.raises(TypeError):
        neardup.DocumentStore.create(tmp_path / "t", threshold="high")
    with pytest.raises(TypeError):
        neardup.DocumentStore.open(None)
    with neardup.DocumentStore.open(docs) as store:
        with pytest.raises(TypeError, match="id must be a str, got int"):
            store.put(1, "text")
        with pytest.raises(TypeError, match="text must be a str, got bytes"):
            store.put("a", b"text")
        with pytest.raises(TypeError, match="text must be a str"):
            store.check(None)
        with pytest.raises(TypeError, match="id must be a str"):
            1 in store
        with pytest.raises(TypeError, match="tuples"):
            store.put_many([("a",)])
        with pytest.raises(TypeError, match="iterable"):
            store.put_many(5)
        with pytest.raises(ValueError, match="ttl"):
            store.put("a", "text", ttl=-1)
        # Nothing of the refused calls was stored.
        assert len(store) == 0

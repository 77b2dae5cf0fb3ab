"""neardup.DocumentStore.connect: the document corpus in a Redis Cluster, against the embedded store
of ``neardup serve --data`` as its oracle (same writes, every check equal), and shared with
``neardup serve --redis`` on the same namespace.

Needs a Redis Cluster (``scripts/redis-cluster.sh start``; ``NEARDUP_REDIS`` its seeds) and
the CLI (``NEARDUP_CLI``, the ``neardup`` binary); without them the tests are skipped,
unless ``NEARDUP_REQUIRE_REDIS=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import neardup

SEEDS = os.environ.get("NEARDUP_REDIS", "").strip()
CLI = os.environ.get("NEARDUP_CLI", "").strip()

if not SEEDS or not CLI:
    if os.environ.get("NEARDUP_REQUIRE_REDIS") == "1":
        raise RuntimeError("NEARDUP_REQUIRE_REDIS=1 but NEARDUP_REDIS or NEARDUP_CLI is not set")
    pytest.skip("NEARDUP_REDIS and NEARDUP_CLI are not set (see scripts/redis-cluster.sh)",
                allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A running ``neardup serve``; stopped by ``close``."""

    def __init__(self, *args: str):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [CLI, "serve", "--listen", f"127.0.0.1:{self.port}", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 30
        while True:
            try:
                self.call("GET", "/healthz")
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"neardup serve {args}: {self.proc.stderr.read().decode()}")
                if time.time() > deadline:
                    raise RuntimeError("neardup serve did not start")
                time.sleep(0.05)

    def call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method=method, headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())

    def check(self, text: str):
        return [(m["id"], m["similarity"]) for m in self.call("POST", "/v1/check", {"text": text})["matches"]]

    def close(self):
        self.proc.kill()
        self.proc.wait()


def text(rng: random.Random) -> str:
    """One of four base texts with a few words replaced: near-duplicates of its base."""
    base = rng.randrange(4)
    words = [f"b{base}w{(i * 37 + base * 11) % 101}" for i in range(80)]
    for _ in range(rng.randrange(6)):
        words[rng.randrange(80)] = f"e{rng.randrange(1000)}"
    return " ".join(words)


def same(got, want) -> bool:
    """Whether (id, similarity) lists agree: the service rounds similarities to 3 places."""
    return len(got) == len(want) and all(
        a == c and abs(b - d) <= 0.0005 + 1e-6 for (a, b), (c, d) in zip(got, want))


def namespace(name: str) -> str:
    return f"py-{os.getpid()}-{name}-{random.randrange(1 << 30)}"


def test_connect_answers_as_the_embedded_store(tmp_path):
    ns = namespace("model")
    store = neardup.DocumentStore.connect(SEEDS, namespace=ns, create=True, threshold=0.8, expected=1000)
    assert isinstance(store, neardup.DocumentStore)
    assert (store.namespace, store.threshold, len(store)) == (ns, 0.8, 0)
    oracle = Served("--data", str(tmp_path / "oracle"), "--create")
    try:
        rng = random.Random(7)
        for step in range(200):
            id = f"d/{rng.randrange(30)}"
            kind = rng.randrange(5)
            if kind <= 1:
                t, gate = text(rng), kind == 1
                want = oracle.call("PUT", f"/v1/documents/{id}", {"text": t, "only_if_unique": gate})
                got = store.put(id, t, only_if_unique=gate)
                assert got["inserted"] == want["inserted"], step
                assert got["replaced"] == want["replaced"], step
                assert same(got["matches"], [(m["id"], m["similarity"]) for m in want["matches"]]), step
            elif kind == 2:
                want = oracle.call("DELETE", f"/v1/documents/{id}")
                assert store.delete(id) == ("removed" in want), step
            elif kind == 3:
                assert (id in store) == ("id" in oracle.call("GET", f"/v1/documents/{id}")), step
            else:
                t = text(rng)
                assert same(store.check(t), oracle.check(t)), step
        assert len(store) == oracle.call("GET", "/healthz")["documents"] > 5
        # In bulk, then seen by a neardup serve over the same corpus.
        docs = [(f"bulk/{i}", text(rng)) for i in range(50)]
        assert store.put_many(docs) == 50
        oracle.call("POST", "/v1/bulk/documents", [{"id": i, "text": t} for i, t in docs])
        shared = Served("--redis", SEEDS, "--redis-namespace", ns)
        try:
            for _ in range(20):
                t = text(rng)
                assert oracle.check(t) == shared.check(t)
                assert same(store.check(t), oracle.check(t))
        finally:
            shared.close()
        assert store.sweep() == 0
    finally:
        oracle.close()


def test_errors_are_clear():
    with pytest.raises(neardup.StoreError, match="no corpus under namespace"):
        neardup.DocumentStore.connect(SEEDS, namespace=namespace("missing"))
    ns = namespace("twice")
    store = neardup.DocumentStore.connect(SEEDS, namespace=ns, create=True)
    with pytest.raises(neardup.StoreError, match="already holds a corpus"):
        neardup.DocumentStore.connect(SEEDS, namespace=ns, create=True)
    with pytest.raises(neardup.StoreError, match="namespace"):
        neardup.DocumentStore.connect(SEEDS, namespace="a{b}")
    with pytest.raises(ValueError):
        neardup.DocumentStore.connect(SEEDS, namespace=ns, create=True, threshold=1.5)
    with pytest.raises(TypeError, match="must be a str"):
        store.put(1, "text")
    with pytest.raises(TypeError, match="must be a str"):
        store.check(b"bytes")
    with pytest.raises(TypeError, match=r"\(id, text\) tuples"):
        store.put_many([("a", "b", "c")])
    with pytest.raises(neardup.StoreError):
        neardup.DocumentStore.connect("127.0.0.1:1")

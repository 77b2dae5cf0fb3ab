"""neardup.simhash against simhash-py's reference outputs (tests/vectors), its documented
behaviour, and brute-force models."""

import array
import doctest
import inspect
import itertools
import json
import random
import re
import threading
from pathlib import Path

import pytest

import neardup
from neardup import simhash

try:
    import numpy
except ImportError:  # numpy is optional: the buffer tests below need it.
    numpy = None

needs_numpy = pytest.mark.skipif(numpy is None, reason="numpy is not installed")

VECTORS = Path(__file__).parent / "vectors"
MAX = 2**64 - 1


def load(name):
    with open(VECTORS / name, encoding="utf-8") as f:
        return json.load(f)


def ints(values):
    return [int(v) for v in values]


def bits(x):
    return bin(x).count("1")


def pairs_of(result):
    """find_all's result as a sorted list, checking its shape on the way."""
    assert isinstance(result, list)
    for pair in result:
        assert isinstance(pair, tuple) and len(pair) == 2
    return sorted(result)


# --- compute ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", load("compute.json"), ids=lambda c: c["name"])
def test_compute_vectors(case):
    hashes = ints(case["hashes"])
    expected = int(case["expected"])
    assert expected == int(case["expected_hex"], 16)
    assert simhash.compute(hashes) == expected
    assert simhash.compute(tuple(hashes)) == expected
    assert simhash.compute(h for h in hashes) == expected
    assert simhash.compute(array.array("Q", hashes)) == expected
    if numpy is not None:
        assert simhash.compute(numpy.array(hashes, dtype=numpy.uint64)) == expected


# --- unsigned_hash ---------------------------------------------------------------------


@pytest.mark.parametrize("case", load("unsigned_hash.json"), ids=lambda c: c["bytes_hex"][:16])
def test_unsigned_hash_vectors(case):
    data = bytes.fromhex(case["bytes_hex"])
    expected = int(case["unsigned_hash"])
    assert expected == int(case["md5_hex"][:16], 16)
    assert simhash.unsigned_hash(data) == expected
    assert simhash.unsigned_hash(bytearray(data)) == expected
    assert simhash.unsigned_hash(memoryview(data)) == expected


def test_unsigned_hash_rejects_str():
    with pytest.raises(TypeError, match="bytes"):
        simhash.unsigned_hash("abcd")
    with pytest.raises(TypeError):
        simhash.unsigned_hash(1234)


# --- shingle ---------------------------------------------------------------------------


SHINGLE_CASES = load("shingle.json")


@pytest.mark.parametrize(
    "case", [c for c in SHINGLE_CASES if "expected" in c], ids=lambda c: str(c["window"])
)
def test_shingle_vectors(case):
    tokens, window, expected = case["tokens"], case["window"], case["expected"]
    assert list(simhash.shingle(tokens, window)) == expected
    # Any iterable, even one that can be read only once.
    assert list(simhash.shingle(iter(tokens), window)) == expected
    assert list(simhash.shingle((t for t in tokens), window)) == expected
    assert list(simhash.shingle(tuple(tokens), window=window)) == expected


@pytest.mark.parametrize(
    "case", [c for c in SHINGLE_CASES if "expected_error" in c], ids=lambda c: str(c["window"])
)
def test_shingle_error_vectors(case):
    kind, message = case["expected_error"].split(": ", 1)
    assert kind == "ValueError"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        list(simhash.shingle(case["tokens"], case["window"]))
    # Raised at the call, before any iteration.
    with pytest.raises(ValueError, match="Window size must be positive"):
        simhash.shingle(case["tokens"], case["window"])


def test_shingle_is_a_generator_that_ends_cleanly():
    tokens = list(range(6))
    gen = simhash.shingle(tokens)
    assert inspect.isgenerator(gen)
    assert next(gen) == [0, 1, 2, 3]  # the default window is 4
    assert list(gen) == [[1, 2, 3, 4], [2, 3, 4, 5]]
    with pytest.raises(StopIteration):
        next(gen)
    # Too few tokens: nothing at all, and no RuntimeError (simhash-py's bug on 3.7+).
    assert list(simhash.shingle([1, 2, 3])) == []
    assert list(simhash.shingle("")) == []


def test_shingle_yields_new_lists():
    out = list(simhash.shingle([1, 2, 3, 4], 2))
    out[0].append(99)
    assert out == [[1, 2, 99], [2, 3], [3, 4]]


def test_shingle_argument_types():
    with pytest.raises(TypeError):
        simhash.shingle([1, 2, 3], 2.0)
    with pytest.raises(TypeError):
        simhash.shingle(5, 2)


# --- num_differing_bits ----------------------------------------------------------------


@pytest.mark.parametrize("case", load("num_differing_bits.json"), ids=lambda c: c["a"][:8])
def test_num_differing_bits_vectors(case):
    a, b = int(case["a"]), int(case["b"])
    assert simhash.num_differing_bits(a, b) == case["expected"]
    assert simhash.num_differing_bits(b, a) == case["expected"]


def test_num_differing_bits_range():
    assert simhash.num_differing_bits(0, MAX) == 64
    with pytest.raises(OverflowError):
        simhash.num_differing_bits(-1, 0)
    with pytest.raises(OverflowError):
        simhash.num_differing_bits(0, 2**64)
    with pytest.raises(TypeError):
        simhash.num_differing_bits("1", 0)


# --- find_all --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    load("find_all_small.json"),
    ids=lambda c: f"{c['name']}-{c['blocks']}-{c['distance']}",
)
def test_find_all_vectors(case):
    hashes = ints(case["hashes"])
    expected = sorted(tuple(ints(p)) for p in case["pairs"])
    for a, b in expected:
        assert a < b
    got = pairs_of(simhash.find_all(hashes, case["blocks"], case["distance"]))
    assert got == expected
    kw = simhash.find_all(
        hashes, number_of_blocks=case["blocks"], different_bits=case["distance"]
    )
    assert pairs_of(kw) == expected
    if numpy is not None:
        arr = numpy.array(hashes, dtype=numpy.uint64)
        assert pairs_of(simhash.find_all(arr, case["blocks"], case["distance"])) == expected


def test_find_all_exact_duplicates_opt_in():
    big = 0xFFFF << 40
    hashes = [5, 5, 7, big, big, big, MAX]
    assert pairs_of(simhash.find_all(hashes, 4, 3)) == [(5, 7)]
    with_dups = pairs_of(simhash.find_all(hashes, 4, 3, exact_duplicates=True))
    assert with_dups == [(5, 5), (5, 7), (big, big)]
    with pytest.raises(TypeError):
        simhash.find_all(hashes, 4, 3, True)  # the flag is keyword-only


def test_find_all_empty_and_single():
    assert simhash.find_all([], 4, 3) == []
    assert simhash.find_all([42], 4, 3) == []
    assert simhash.find_all([42, 42], 4, 3) == []


@pytest.mark.parametrize(
    "blocks, distance, message",
    [
        (3, 3, "greater than distance"),
        (2, 5, "greater than distance"),
        (65, 3, "between 1 and 64"),
        (0, 0, "between 1 and 64"),
        (-4, 3, "between 1 and 64"),
        (4, -1, "between 0 and 64"),
        (2**70, 3, "between 1 and 64"),
        (64, 20, "tables"),
    ],
)
def test_bad_layouts_raise_value_error(blocks, distance, message):
    with pytest.raises(ValueError, match=message):
        simhash.find_all([1, 2, 3], blocks, distance)
    with pytest.raises(ValueError):
        simhash.Corpus(blocks, distance)


def test_layout_arguments_must_be_ints():
    with pytest.raises(TypeError):
        simhash.find_all([1, 2], "4", 3)
    with pytest.raises(TypeError):
        simhash.Corpus(4, 3.0)


def test_corpus_limits_its_tables():
    simhash.Corpus(8, 3)  # 56 tables
    with pytest.raises(ValueError, match="tables"):
        simhash.Corpus(64, 3)  # 41,664 tables: fine for a batch, not for an index


def test_corpus_of_simhash_py_own_test_is_built():
    # simhash-py's test suite builds Corpus(20, 16): 4,845 tables, each holding every
    # fingerprint (about 78 KB a fingerprint), usable for small corpora as there.
    corpus = simhash.Corpus(20, 16)
    docs = [0, 0xFFFF, 0xFFFF_0000_0000_0000, (1 << 64) - 1]
    corpus.insert_bulk(docs)
    query = 0xFF  # 8 bits from 0 and from 0xFFFF; far from the others
    assert sorted(corpus.find_all(query)) == [0, 0xFFFF]
    assert sorted(corpus.find_all(query)) == sorted(
        d for d in docs if simhash.num_differing_bits(d, query) <= 16
    )


@pytest.mark.parametrize("bad", [-1, 2**64, 2**100, -(2**70)])
def test_out_of_range_ints_raise_overflow_error(bad):
    with pytest.raises(OverflowError):
        simhash.compute([1, bad])
    with pytest.raises(OverflowError):
        simhash.find_all([1, 2, bad], 4, 3)
    corpus = simhash.Corpus(4, 3)
    for method in (corpus.insert, corpus.remove, corpus.find_first, corpus.find_all):
        with pytest.raises(OverflowError):
            method(bad)
    for method in (
        corpus.insert_bulk,
        corpus.remove_bulk,
        corpus.find_first_bulk,
        corpus.find_all_bulk,
    ):
        with pytest.raises(OverflowError):
            method([3, bad])
    assert len(corpus) == 0


def test_inputs_that_are_not_ints():
    with pytest.raises(TypeError):
        simhash.compute(12)
    with pytest.raises(TypeError):
        simhash.compute(["12"])
    with pytest.raises(TypeError):
        simhash.find_all([1.5, 2], 4, 3)
    with pytest.raises(TypeError):
        simhash.Corpus(4, 3).insert_bulk([None])


def test_largest_values():
    hashes = [MAX, MAX - 1, MAX ^ (1 << 63), 0]
    assert pairs_of(simhash.find_all(hashes, 4, 1)) == [(MAX ^ (1 << 63), MAX), (MAX - 1, MAX)]
    assert simhash.compute([MAX, MAX, 0]) == MAX


# --- numpy and other buffers -----------------------------------------------------------


def planted(n, seed, flips=3):
    """`n` random fingerprints, half of them near copies of the other half."""
    rng = random.Random(seed)
    base = [rng.getrandbits(64) for _ in range(n // 2)]
    near = []
    for b in base:
        for bit in rng.sample(range(64), rng.randint(0, flips)):
            b ^= 1 << bit
        near.append(b)
    out = base + near
    rng.shuffle(out)
    return out


def brute_pairs(values, distance):
    vs = sorted(set(values))
    return [
        (a, b)
        for i, a in enumerate(vs)
        for b in vs[i + 1 :]
        if bits(a ^ b) <= distance
    ]


def test_find_all_against_brute_force():
    values = planted(600, seed=1, flips=4)
    for blocks, distance in [(4, 3), (6, 3), (3, 2), (2, 1), (5, 4), (1, 0), (8, 4)]:
        assert pairs_of(simhash.find_all(values, blocks, distance)) == brute_pairs(
            values, distance
        )


@needs_numpy
def test_numpy_and_lists_agree():
    values = planted(20_000, seed=2)
    expected = pairs_of(simhash.find_all(values, 6, 3))
    assert len(expected) > 1000
    u = numpy.array(values, dtype=numpy.uint64)
    assert pairs_of(simhash.find_all(u, 6, 3)) == expected
    assert pairs_of(simhash.find_all(u.astype(">u8"), 6, 3)) == expected
    # Strided views are read correctly too.
    twice = numpy.repeat(u, 2)
    assert pairs_of(simhash.find_all(twice[::2], 6, 3)) == expected
    assert simhash.compute(u) == simhash.compute(values)
    assert simhash.compute(u[::3]) == simhash.compute(values[::3])
    # Numpy scalars are ints.
    assert simhash.num_differing_bits(u[0], u[1]) == simhash.num_differing_bits(
        values[0], values[1]
    )
    corpus = simhash.Corpus(4, 3)
    corpus.insert_bulk(u[:10_000])
    queries = u[5_000:15_000]
    assert corpus.find_all_bulk(queries) == corpus.find_all_bulk(values[5_000:15_000])
    assert corpus.find_first_bulk(queries) == corpus.find_first_bulk(values[5_000:15_000])
    assert corpus.hashes() == sorted(set(values[:10_000]))
    corpus.remove_bulk(u[:5_000])
    assert corpus.hashes() == sorted(set(values[:10_000]) - set(values[:5_000]))


@needs_numpy
def test_numpy_signed_and_other_dtypes():
    values = [0, 1, 3, 2**62, 2**63 - 1]
    expected = pairs_of(simhash.find_all(values, 4, 3))
    assert pairs_of(simhash.find_all(numpy.array(values, dtype=numpy.int64), 4, 3)) == expected
    with pytest.raises(OverflowError):
        simhash.find_all(numpy.array([1, -1], dtype=numpy.int64), 4, 3)
    # Narrower integer arrays are read element by element, with the same results.
    small = numpy.array([1, 3, 7, 250], dtype=numpy.uint8)
    assert simhash.compute(small) == simhash.compute([1, 3, 7, 250])
    with pytest.raises(OverflowError):
        simhash.compute(numpy.array([1, -3], dtype=numpy.int32))
    with pytest.raises(TypeError):
        simhash.compute(numpy.array([1.0, 2.0]))


def test_array_module_buffers():
    values = planted(1000, seed=3)
    expected = pairs_of(simhash.find_all(values, 4, 3))
    assert pairs_of(simhash.find_all(array.array("Q", values), 4, 3)) == expected
    signed = array.array("q", [1, 2, -5])
    with pytest.raises(OverflowError):
        simhash.compute(signed)


# --- Corpus ----------------------------------------------------------------------------


class Model:
    """The old Corpus as a set, matched by brute force."""

    def __init__(self, distance):
        self.distance = distance
        self.stored = set()

    def matches(self, q):
        found = [(bits(q ^ v), v) for v in self.stored if bits(q ^ v) <= self.distance]
        return [v for _, v in sorted(found)]

    def find_first(self, q):
        m = self.matches(q)
        return m[0] if m else None


def check(corpus, model, queries):
    assert len(corpus) == len(model.stored)
    assert corpus.hashes() == sorted(model.stored)
    for q in queries:
        assert corpus.find_all(q) == model.matches(q), q
        assert corpus.find_first(q) == model.find_first(q), q
        assert (q in corpus) == (q in model.stored)
    assert corpus.find_all_bulk(queries) == [model.matches(q) for q in queries]
    assert corpus.find_first_bulk(queries) == [model.find_first(q) for q in queries]


@pytest.mark.parametrize("blocks, distance", [(4, 3), (6, 3), (3, 2), (2, 1), (5, 4), (1, 0)])
def test_corpus_against_model(blocks, distance):
    rng = random.Random(blocks * 100 + distance)
    pool = planted(3000, seed=blocks * 10 + distance, flips=distance + 1)
    corpus, model = simhash.Corpus(blocks, distance), Model(distance)

    def near(v):
        for bit in rng.sample(range(64), rng.randint(0, distance + 1)):
            v ^= 1 << bit
        return v

    def queries():
        some = rng.sample(pool, 40) + [near(v) for v in rng.sample(pool, 40)]
        return some + [rng.getrandbits(64) for _ in range(5)]

    for step in range(30):
        op = rng.randrange(6)
        if op == 0:
            for v in rng.sample(pool, 20):
                corpus.insert(v)
                model.stored.add(v)
        elif op == 1:
            # Bulk inserts: repeats inside the batch and values already present.
            batch = rng.sample(pool, rng.choice([5, 100, 700])) * 2
            corpus.insert_bulk(batch)
            model.stored.update(batch)
        elif op == 2:
            for v in rng.sample(pool, 20):
                corpus.remove(v)
                model.stored.discard(v)
        elif op == 3:
            batch = rng.sample(pool, rng.choice([5, 300]))
            corpus.remove_bulk(iter(batch))
            model.stored.difference_update(batch)
        elif op == 4:
            # Inserting a present value changes nothing; one removal removes it.
            if model.stored:
                v = rng.choice(sorted(model.stored))
                corpus.insert(v)
                corpus.insert_bulk([v, v])
                corpus.remove(v)
                model.stored.discard(v)
                assert v not in corpus
        else:
            check(corpus, model, queries())
    check(corpus, model, queries())


def test_corpus_large_batches_and_folds():
    # Enough writes to fill the index's small levels and rebuild its main part.
    values = planted(40_000, seed=9)
    corpus, model = simhash.Corpus(4, 3), Model(3)
    for chunk in range(0, 30_000, 3_000):
        corpus.insert_bulk(values[chunk : chunk + 3_000])
        model.stored.update(values[chunk : chunk + 3_000])
    for v in values[30_000:30_500]:
        corpus.insert(v)
        model.stored.add(v)
    corpus.remove_bulk(values[:10_000:2])
    model.stored.difference_update(values[:10_000:2])
    rng = random.Random(4)
    check(corpus, model, rng.sample(values, 60) + [rng.getrandbits(64) for _ in range(10)])


def test_corpus_find_first_none_and_zero():
    corpus = simhash.Corpus(4, 3)
    assert corpus.find_first(0) is None
    assert corpus.find_all(0) == []
    corpus.insert(0)
    assert corpus.find_first(0) == 0  # 0 is a fingerprint, not "not found"
    assert corpus.find_first(0b111) == 0
    assert corpus.find_first(0b1111) is None
    assert corpus.find_first_bulk([0b1, 0b11110000]) == [0, None]


def test_corpus_find_all_returns_each_match_once():
    corpus = simhash.Corpus(6, 3)  # 20 tables: the old Corpus repeated matches
    base = 0xDEADBEEF
    near = [base, base ^ 1, base ^ 0b11, base ^ (1 << 63), base ^ 0b111 << 30]
    corpus.insert_bulk(near)
    got = corpus.find_all(base)
    assert got == [base, base ^ 1, base ^ (1 << 63), base ^ 0b11, base ^ 0b111 << 30]
    assert len(got) == len(set(got))


@pytest.mark.parametrize("blocks, distance", [(6, 3), (6, 2), (8, 6), (4, 0), (2, 1)])
def test_corpus_tables_as_simhash_py_had_them(blocks, distance):
    """simhash-py's own test of Corpus.tables: unpermute undoes permute on every table."""
    corpus = simhash.Corpus(blocks, distance)
    assert corpus.differing_bits == distance
    # One table per choice of blocks - distance leading blocks, in itertools order, as
    # simhash-py's Corpus made them.
    combos = itertools.combinations(range(blocks), blocks - distance)
    assert [t.leading_blocks for t in corpus.tables] == [list(c) for c in combos]
    rng = random.Random(blocks * 100 + distance)
    queries = [rng.getrandbits(64) for _ in range(100)] + [0, 2**64 - 1]
    for table in corpus.tables:
        for q in queries:
            assert table.unpermute(table.permute(q)) == q
    # The same tables as neardup.Layout's (whose permutations the reference vectors pin).
    layout = neardup.Layout(blocks, distance)
    assert [t.bit_map() for t in corpus.tables] == [t.bit_map() for t in layout.tables]


def test_corpus_tables_permute_as_the_reference_does():
    with open(VECTORS / "permutations.jsonl", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    checked = 0
    for case in cases:
        try:
            corpus = simhash.Corpus(case["blocks"], case["distance"])
        except ValueError:  # more tables than an index keeps
            continue
        assert len(corpus.tables) == case["num_tables"]
        for table, expected in zip(corpus.tables, case["tables"]):
            for x_hex, y_hex in expected["apply"]:
                assert table.permute(int(x_hex, 16)) == int(y_hex, 16)
                assert table.unpermute(int(y_hex, 16)) == int(x_hex, 16)
                checked += 1
    assert checked > 100


def test_corpus_tables_find_what_the_corpus_finds():
    """Near fingerprints agree under some table's search mask (the pigeonhole the tables
    rely on), and code that inspects the tables that way finds what the corpus finds."""
    corpus = simhash.Corpus(6, 3)
    rng = random.Random(7)
    stored = [rng.getrandbits(64) for _ in range(200)]
    corpus.insert_bulk(stored)
    for x in stored[:40]:
        q = x
        for bit in rng.sample(range(64), rng.randrange(0, 6)):
            q ^= 1 << bit
        by_tables = {
            s
            for t in corpus.tables
            for s in stored
            if t.permute(s) & t.search_mask == t.permute(q) & t.search_mask
            and simhash.num_differing_bits(s, q) <= corpus.differing_bits
        }
        assert by_tables == set(corpus.find_all(q))
        assert (x in by_tables) == (simhash.num_differing_bits(x, q) <= 3)


def test_corpus_empty_inputs_and_repr():
    corpus = simhash.Corpus(4, 3)
    corpus.insert_bulk([])
    corpus.remove_bulk([])
    corpus.remove(12345)  # absent: nothing happens
    assert corpus.find_all_bulk([]) == []
    assert corpus.find_first_bulk([]) == []
    assert corpus.hashes() == []
    assert "x" not in corpus and -1 not in corpus
    assert "num_blocks=4" in repr(corpus)


def test_corpus_shared_between_threads():
    values = planted(20_000, seed=11)
    expected, removed = set(values[:5_000]), set()
    for chunk in range(5_000, 20_000, 1_000):
        expected.update(values[chunk : chunk + 1_000])
        expected.difference_update(values[chunk : chunk + 100])
        removed.update(values[chunk : chunk + 100])
    # Stored before the threads start and never removed: each always finds itself.
    stable = [v for v in values[:5_000] if v not in removed]
    corpus = simhash.Corpus(4, 3)
    corpus.insert_bulk(values[:5_000])
    errors = []

    def writer():
        try:
            for chunk in range(5_000, 20_000, 1_000):
                corpus.insert_bulk(values[chunk : chunk + 1_000])
                corpus.remove_bulk(values[chunk : chunk + 100])
        except Exception as e:  # reported below
            errors.append(e)

    def reader():
        try:
            for _ in range(20):
                assert corpus.find_first_bulk(stable) == stable
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert corpus.hashes() == sorted(expected)


# --- the documented pipeline -----------------------------------------------------------


@pytest.mark.parametrize("case", load("pipeline.json"), ids=lambda c: c["name"])
def test_pipeline_char4(case):
    """simhash-py's own functional test, through this module's functions."""
    char4 = case["char4"]
    tokens = re.split(r"\W+", case["text"].lower())
    assert tokens == char4["tokens"]
    joined = "".join(tokens)
    assert joined == char4["joined"]
    shingles = ["".join(s) for s in simhash.shingle(joined, 4)]
    assert shingles == char4["shingles"]
    hashes = [simhash.unsigned_hash(s.encode("utf-8")) for s in shingles]
    assert hashes == ints(char4["hashes"])
    assert simhash.compute(hashes) == int(char4["simhash"]) == int(char4["simhash_hex"], 16)


@pytest.mark.parametrize("case", load("pipeline.json"), ids=lambda c: c["name"])
def test_pipeline_word4(case):
    word4 = case["word4_variant"]
    tokens = re.split(r"\W+", case["text"].lower())
    shingles = [" ".join(s) for s in simhash.shingle(tokens, 4)]
    assert shingles == word4["shingles"]
    hashes = [simhash.unsigned_hash(s.encode("utf-8")) for s in shingles]
    assert hashes == ints(word4["hashes"])
    assert simhash.compute(hashes) == int(word4["simhash"])


# --- the package -----------------------------------------------------------------------


def test_docstring_examples():
    result = doctest.testmod(simhash)
    assert result.attempted > 0 and result.failed == 0


def test_public_names():
    assert neardup.simhash is simhash
    assert set(simhash.__all__) == {
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
    }
    for name in simhash.__all__:
        assert getattr(simhash, name).__doc__
    package = Path(neardup.__file__).parent
    assert (package / "py.typed").exists()
    assert (package / "_neardup.pyi").exists()

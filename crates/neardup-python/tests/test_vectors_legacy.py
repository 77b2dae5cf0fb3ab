"""The two reference files the other tests do not read, through the Python API:
permutations.jsonl (neardup.Layout / Table) and legacy_jenkins_cyclic.json (the legacy
fingerprints of neardup.simhash), plus the errors of both APIs."""

import doctest
import json
import random
from pathlib import Path

import pytest

import neardup
from neardup import simhash

try:
    import numpy
except ImportError:  # numpy is optional.
    numpy = None

VECTORS = Path(__file__).parent / "vectors"
MAX = 2**64 - 1


def hexes(values):
    return [int(v, 16) for v in values]


# --- permutations.jsonl ----------------------------------------------------------------


def permutation_cases():
    with open(VECTORS / "permutations.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


PERMUTATIONS = permutation_cases()


def test_permutation_file_is_all_there():
    # Every (blocks, distance) of the file is a case below; a truncated copy would not be.
    assert len(PERMUTATIONS) == 15
    assert sum(len(case["tables"]) for case in PERMUTATIONS) == 923


@pytest.mark.parametrize(
    "case", PERMUTATIONS, ids=lambda c: f"b{c['blocks']}-d{c['distance']}"
)
def test_permutation_vectors(case):
    layout = neardup.Layout(case["blocks"], case["distance"])
    assert (layout.blocks, layout.distance) == (case["blocks"], case["distance"])
    tables = layout.tables
    assert len(tables) == len(layout) == case["num_tables"] == len(case["tables"])
    for i, (table, expected) in enumerate(zip(tables, case["tables"])):
        assert table.index == i
        assert table.search_mask == int(expected["search_mask"], 16)
        assert table.leading_bits == bin(table.search_mask).count("1")
        bit_map = table.bit_map()
        assert bit_map == expected["bit_map"]
        assert sorted(bit_map) == list(range(64))
        assert expected["apply"], "every table has samples"
        for x_hex, y_hex in expected["apply"]:
            x, y = int(x_hex, 16), int(y_hex, 16)
            assert table.permute(x) == y
            assert table.unpermute(y) == x


@pytest.mark.parametrize(
    "case", PERMUTATIONS, ids=lambda c: f"b{c['blocks']}-d{c['distance']}"
)
def test_permutation_follows_bit_map(case):
    """permute moves each bit where bit_map says, on random values too."""
    rng = random.Random(case["blocks"] * 100 + case["distance"])
    for table in neardup.Layout(case["blocks"], case["distance"]).tables:
        bit_map = table.bit_map()
        for _ in range(4):
            x = rng.getrandbits(64)
            expected = sum(1 << bit_map[i] for i in range(64) if x >> i & 1)
            assert table.permute(x) == expected
            assert table.unpermute(expected) == x
        # The leading blocks, in increasing order, fill the search mask from the top.
        lead = table.leading_blocks
        assert lead == sorted(lead) and len(lead) == case["blocks"] - case["distance"]


def test_table_views_outlive_their_layout():
    tables = neardup.Layout(6, 3).tables
    assert tables[19].permute(1) == neardup.Layout(6, 3).tables[19].permute(1)
    assert "index=19" in repr(tables[19]) and "20 tables" in repr(neardup.Layout(6, 3))


@pytest.mark.parametrize(
    "blocks, distance, error, message",
    [
        (0, 0, ValueError, "blocks"),
        (65, 3, ValueError, "blocks"),
        (-1, 0, ValueError, "blocks"),
        (3, 3, ValueError, "greater than distance"),
        (4, 5, ValueError, "greater than distance"),
        (3, -1, ValueError, "distance"),
        (2**70, 3, ValueError, "blocks"),
        (40, 20, ValueError, "tables"),
        ("4", 3, TypeError, "int"),
        (4, 1.5, TypeError, "int"),
    ],
)
def test_layout_errors(blocks, distance, error, message):
    with pytest.raises(error, match=message):
        neardup.Layout(blocks, distance)


def test_table_errors():
    table = neardup.Layout(4, 3).tables[0]
    for bad in (-1, MAX + 1):
        with pytest.raises(OverflowError):
            table.permute(bad)
        with pytest.raises(OverflowError):
            table.unpermute(bad)
    with pytest.raises(TypeError):
        table.permute("1")
    with pytest.raises(TypeError):
        neardup.Table()
    if numpy is not None:
        assert table.permute(numpy.uint64(MAX)) == MAX


# --- legacy_jenkins_cyclic.json --------------------------------------------------------


with open(VECTORS / "legacy_jenkins_cyclic.json", encoding="utf-8") as _f:
    LEGACY = json.load(_f)


def test_legacy_file_is_all_there():
    assert set(LEGACY) == {
        "jenkins64",
        "hash_text_jenkins_strspn",
        "old_simhash_py_PyHash",
        "old_simhash_py_PyHashFp",
    }
    assert [len(LEGACY[k]) for k in LEGACY] == [11, 7, 5, 2]


@pytest.mark.parametrize("case", LEGACY["jenkins64"], ids=lambda c: c["bytes_hex"][:16] or "empty")
def test_jenkins64_vectors(case):
    data = bytes.fromhex(case["bytes_hex"])
    assert case["jenkins64"], "every case has seeds"
    for seed, expected in case["jenkins64"].items():
        expected = int(expected, 16)
        assert simhash.jenkins64(data, int(seed)) == expected
        assert simhash.jenkins64(data, seed=int(seed)) == expected
        assert simhash.jenkins64(bytearray(data), int(seed)) == expected
        assert simhash.jenkins64(memoryview(data), int(seed)) == expected
        if seed == "0":
            assert simhash.jenkins64(data) == expected


@pytest.mark.parametrize(
    "case", LEGACY["hash_text_jenkins_strspn"], ids=lambda c: c["name"].split(" (")[0]
)
def test_legacy_cpp_vectors(case):
    data = case["text"].encode("utf-8")
    assert simhash.legacy_cpp_tokens(data) == [t.encode("utf-8") for t in case["tokens"]]
    token_hashes = hexes(case["token_jenkins64_hex"])
    assert [simhash.jenkins64(t.encode("utf-8")) for t in case["tokens"]] == token_hashes
    stream = hexes(case["cyclic3_hex"])
    assert simhash.cyclic3(token_hashes) == stream
    assert simhash.cyclic3(iter(token_hashes)) == stream
    if numpy is not None:
        assert simhash.cyclic3(numpy.array(token_hashes, dtype=numpy.uint64)) == stream
    expected = int(case["hash_text_hex"], 16)
    # The fingerprint is the bit-reversed compute of the cyclic stream.
    reversed_compute = int(f"{simhash.compute(stream):064b}"[::-1], 2)
    assert reversed_compute == expected
    assert simhash.legacy_cpp_fingerprint(data) == expected
    assert simhash.legacy_cpp_fingerprint(bytearray(data)) == expected
    # Everything after a NUL byte is ignored.
    assert simhash.legacy_cpp_fingerprint(data + b"\0more words") == expected


def test_jabberwocky():
    """simhash-cpp's own hash_test."""
    (case,) = [c for c in LEGACY["hash_text_jenkins_strspn"] if c["name"].startswith("jabberwocky (")]
    assert simhash.legacy_cpp_fingerprint(case["text"].encode("utf-8")) == 0x041379A587C66880


@pytest.mark.parametrize("case", LEGACY["old_simhash_py_PyHash"], ids=lambda c: c["name"])
def test_old_simhash_py_hash_vectors(case):
    expected = int(case["PyHash_hex"], 16)
    assert simhash.hash(case["text"]) == expected
    # The same as the pipeline from its parts: \W+ pieces, empty ones skipped.
    pieces = [t.encode("utf-8") for t in case["re_split_tokens"] if t]
    stream = simhash.cyclic3([simhash.jenkins64(p) for p in pieces])
    assert int(f"{simhash.compute(stream):064b}"[::-1], 2) == expected


@pytest.mark.parametrize(
    "case", LEGACY["old_simhash_py_PyHashFp"], ids=lambda c: f"{len(c['values_int64'])}values"
)
def test_old_simhash_py_hash_fp_vectors(case):
    values = case["values_int64"]
    expected = int(case["PyHashFp_hex"], 16)
    assert simhash.hash_fp(values) == expected
    assert simhash.hash_fp(tuple(values)) == expected
    assert simhash.hash_fp(v for v in values) == expected
    if numpy is not None:
        assert simhash.hash_fp(numpy.array(values, dtype=numpy.int64)) == expected
    # jenkins64 of each value's 8 little-endian bytes, cyclic, reversed compute.
    hashes = [simhash.jenkins64(v.to_bytes(8, "little", signed=True)) for v in values]
    assert int(f"{simhash.compute(simhash.cyclic3(hashes)):064b}"[::-1], 2) == expected


def test_legacy_errors():
    for func in (simhash.jenkins64, simhash.legacy_cpp_fingerprint, simhash.legacy_cpp_tokens):
        with pytest.raises(TypeError, match="bytes"):
            func("text")
        with pytest.raises(TypeError):
            func(5)
    with pytest.raises(TypeError, match="str"):
        simhash.hash(b"text")
    with pytest.raises(TypeError):
        simhash.hash(None)
    for seed in (-1, MAX + 1):
        with pytest.raises(OverflowError, match="seed"):
            simhash.jenkins64(b"a", seed)
    assert simhash.jenkins64(b"a", MAX) == simhash.jenkins64(b"a", seed=MAX)
    with pytest.raises(TypeError):
        simhash.jenkins64(b"a", "1")
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(OverflowError):
            simhash.hash_fp([1, bad])
    assert simhash.hash_fp([2**63 - 1, -(2**63)]) == simhash.hash_fp((2**63 - 1, -(2**63)))
    for bad in ("abc", b"abc", 5):
        with pytest.raises(TypeError):
            simhash.hash_fp(bad)
    with pytest.raises(TypeError):
        simhash.hash_fp([1.5])
    for bad in (-1, MAX + 1):
        with pytest.raises(OverflowError):
            simhash.cyclic3([1, bad])
    with pytest.raises(TypeError):
        simhash.cyclic3(["1"])


def test_long_inputs_match_their_parts():
    """Inputs long enough to be hashed without the GIL give the same results."""
    # Letters only, so that both tokenizers see the same words.
    words = [f"word{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}" for i in range(40_000)]
    text = " ".join(words)
    assert simhash.hash(text) == int(
        f"{simhash.compute(simhash.cyclic3(simhash.jenkins64(w.encode()) for w in words)):064b}"[::-1],
        2,
    )
    data = text.encode()
    tokens = simhash.legacy_cpp_tokens(data)
    assert len(tokens) == len(words)
    stream = simhash.cyclic3([simhash.jenkins64(t) for t in tokens])
    assert simhash.legacy_cpp_fingerprint(data) == int(f"{simhash.compute(stream):064b}"[::-1], 2)
    big = bytes(range(256)) * 1000
    assert simhash.jenkins64(big, 7) == simhash.jenkins64(bytearray(big), 7)


# --- the docs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        simhash.hash,
        simhash.hash_fp,
        simhash.jenkins64,
        simhash.cyclic3,
        simhash.legacy_cpp_tokens,
        simhash.legacy_cpp_fingerprint,
        neardup.Layout,
        neardup.Table,
    ],
    ids=lambda o: o.__name__,
)
def test_docstring_examples(obj):
    tests = doctest.DocTestFinder(recurse=False).find(obj, obj.__name__, globs={})
    examples = sum(len(t.examples) for t in tests)
    assert examples > 0, "every legacy function and layout class has an example"
    runner = doctest.DocTestRunner()
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0

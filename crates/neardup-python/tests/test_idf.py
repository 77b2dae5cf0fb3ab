"""neardup.Idf: tables counted from Python against hand counts, the documented file format
and the CLI (`neardup idf`), byte for byte; reading, writing, and every error."""

import json
import math
import os
import random
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import neardup

VECTORS = Path(__file__).parent / "vectors"
REPO = Path(__file__).resolve().parents[3]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def table_bytes(docs, df, min_df):
    """The table by the format documented in fingerprint/weight.rs: b"NDUPIDF1", then
    little-endian docs: u64, count: u64, and (feature: u64, df: u32) by feature."""
    kept = sorted((f, d) for f, d in df.items() if d >= min_df)
    return (b"NDUPIDF1" + struct.pack("<QQ", docs, len(kept))
            + b"".join(struct.pack("<QI", f, d) for f, d in kept))


def counted(texts, fp):
    """Document frequencies as `neardup idf` counts them: each text's distinct features."""
    df = Counter()
    for t in texts:
        df.update(fp.feature_set(t))
    return df


def corpus(rng, n):
    """Texts with repeated and rare words, case, accents, typographic quotes, CJK, runs of
    white space, and empty ones."""
    words = ("the a of cat dog bird sat ran on in mat log hand Café CAFÉ naïve don’t “quoted” "
             "大学 学生 ﬁne x1 42 tree trees Tree").split()
    out = []
    for _ in range(n):
        k = rng.choice([0, 1, 2, 3, 5, 8, 13, 30])
        sep = rng.choice([" ", "  ", "\n", " \t "])
        out.append(sep.join(rng.choice(words) for _ in range(k)))
    return out


# --- counting -----------------------------------------------------------------------------


def test_hand_counted_table():
    texts = ["the cat sat", "The cat ran", "a dog ran", "", "cat cat CAT"]
    words = neardup.Fingerprinter(window=1)
    feature = {w: words.feature_set(w) for w in ["the", "cat", "sat", "ran", "a", "dog"]}
    assert all(len(f) == 1 for f in feature.values())
    feature = {w: f[0] for w, f in feature.items()}
    # By hand: lowercased words, each counted once per text; the empty text is a document.
    df = {"the": 2, "cat": 3, "sat": 1, "ran": 2, "a": 1, "dog": 1}
    df = {feature[w]: d for w, d in df.items()}
    for min_df in [0, 1, 2, 3, 4]:
        idf = neardup.Idf.build(texts, min_df=min_df, fingerprinter=words)
        assert idf.docs == 5
        assert len(idf) == sum(d >= min_df for d in df.values())
        assert idf.to_bytes() == table_bytes(5, df, min_df)
    # The documented value: ln((1 + docs) / (1 + df)) + 1, in single precision; features
    # the table lacks weigh as never seen.
    idf = neardup.Idf.build(texts, min_df=2, fingerprinter=words)
    for f, d in df.items():
        seen = d if d >= 2 else 0
        assert idf.idf(f) == f32(f32(math.log(6 / (1 + seen))) + 1.0)
    assert idf.idf(12345) == idf.idf(feature["dog"]) == f32(f32(math.log(6)) + 1.0)
    assert idf.idf(feature["cat"]) < idf.idf(feature["the"]) < idf.idf(feature["dog"])


def test_shingles_are_counted():
    # Window 2: "a b" and "b a" are different features, "a b" twice in a text once.
    fp = neardup.Fingerprinter()
    texts = ["a b a b", "b a", "a b"]
    [ab] = fp.feature_set("a b")
    [ba] = fp.feature_set("b a")
    assert sorted(fp.feature_set("a b a b")) == sorted([ab, ba])
    assert neardup.Idf.build(texts, min_df=1).to_bytes() == table_bytes(3, {ab: 2, ba: 2}, 1)


@pytest.mark.parametrize("settings", [
    {},
    {"window": 1},
    {"window": 3, "lowercase": False},
    {"tokenizer": "char:3", "window": 1},
    {"tokenizer": "char:4", "window": 2, "fold_whitespace": False},
    {"tokenizer": "ascii", "nfkc": False, "ascii_quotes": False},
], ids=repr)
def test_random_corpus_against_a_count(settings):
    rng = random.Random(len(repr(settings)))
    # More texts than one batch (4096), so that batches are merged.
    texts = corpus(rng, 5000)
    fp = neardup.Fingerprinter(**settings)
    df = counted(texts, fp)
    for min_df in [1, 2, 7]:
        expected = table_bytes(len(texts), df, min_df)
        assert neardup.Idf.build(texts, min_df=min_df, fingerprinter=fp).to_bytes() == expected
    expected = table_bytes(len(texts), df, 2)
    assert neardup.Idf.build(iter(texts), fingerprinter=fp).to_bytes() == expected
    assert neardup.Idf.build(tuple(texts), fingerprinter=fp).to_bytes() == expected
    assert neardup.Idf.build((t for t in texts), fingerprinter=fp).to_bytes() == expected


def test_defaults_and_what_does_not_matter():
    texts = corpus(random.Random(1), 300)
    default = neardup.Idf.build(texts).to_bytes()
    # min_df=2 and Fingerprinter(), as `neardup idf` without flags.
    assert default == table_bytes(300, counted(texts, neardup.Fingerprinter()), 2)
    assert neardup.Idf.build(texts, min_df=2, fingerprinter=neardup.Fingerprinter()).to_bytes() \
        == default
    # The weighting and paragraph size take no part in the features.
    for other in [{"weighting": "none"}, {"weighting": "lenpos", "lambda_": 2.0},
                  {"weights": {"cat": 9.0}}, {"idf": neardup.Idf.build(texts[:10])},
                  {"min_paragraph": 1}]:
        fp = neardup.Fingerprinter(**other)
        assert neardup.Idf.build(texts, fingerprinter=fp).to_bytes() == default, other
    # The tokenizer, window and normalisation do.
    for changed in [{"window": 1}, {"tokenizer": "char:3"}, {"lowercase": False}]:
        fp = neardup.Fingerprinter(**changed)
        assert neardup.Idf.build(texts, fingerprinter=fp).to_bytes() != default, changed


def test_empty_corpus():
    idf = neardup.Idf.build([])
    assert idf.docs == 0 and len(idf) == 0
    assert idf.to_bytes() == table_bytes(0, {}, 1)
    assert idf.idf(7) == 1.0
    assert repr(idf) == "Idf(docs=0, features=0)"
    assert repr(neardup.Idf.build(["a b", "a b"])) == "Idf(docs=2, features=1)"


# --- the CLI ------------------------------------------------------------------------------


def cli_args(settings, min_df):
    args = []
    for key, value in settings.items():
        if value is False:
            args.append("--no-" + key.replace("_", "-"))
        else:
            args += ["--" + key, str(value)]
    return args if min_df is None else args + ["--min-df", str(min_df)]


def build_kwargs(case):
    kwargs = {"fingerprinter": neardup.Fingerprinter(**case["settings"])}
    if case["min_df"] is not None:
        kwargs["min_df"] = case["min_df"]
    return kwargs


PINNED = json.loads((VECTORS / "idf_cli.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", PINNED["cases"], ids=lambda c: " ".join(c["args"]) or "defaults")
def test_pinned_cli_tables(case):
    """Tables `neardup idf` wrote (tests/vectors/idf_cli.json), made again from Python."""
    assert case["args"] == cli_args(case["settings"], case["min_df"])
    idf = neardup.Idf.build(PINNED["texts"], **build_kwargs(case))
    assert idf.to_bytes() == bytes.fromhex(case["table"])


def find_cli():
    """The `neardup` binary: $NEARDUP_CLI, or the newest one cargo built in this checkout
    (CI builds it in `cargo test` before the Python tests run)."""
    if os.environ.get("NEARDUP_CLI"):
        return os.environ["NEARDUP_CLI"]
    targets = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    targets.append(REPO / "target")
    built = [p for t in targets for p in (t / "debug" / "neardup", t / "release" / "neardup")
             if p.is_file() and os.access(p, os.X_OK)]
    return str(max(built, key=lambda p: p.stat().st_mtime)) if built else None


def run_cli(cli, texts, args, tmp_path):
    docs = tmp_path / "docs.jsonl"
    with open(docs, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    out = tmp_path / "out.idf"
    subprocess.run([cli, "idf", str(docs), "-o", str(out), *args], check=True,
                   capture_output=True)
    return out.read_bytes()


@pytest.fixture(scope="module")
def cli():
    found = find_cli()
    if found is None:
        pytest.skip("no neardup binary: cargo build -p neardup-cli, or set NEARDUP_CLI")
    return found


@pytest.mark.parametrize("settings, min_df", [
    ({}, None),
    ({}, 1),
    ({"window": 1}, 3),
    ({"window": 3, "lowercase": False, "nfkc": False}, 1),
    ({"tokenizer": "char:3", "window": 1, "fold_whitespace": False}, 2),
    ({"tokenizer": "ascii", "ascii_quotes": False}, 1),
    ({"tokenizer": "jieba"}, 1),
], ids=repr)
def test_same_bytes_as_the_cli(cli, settings, min_df, tmp_path):
    texts = corpus(random.Random(9), 6000)
    case = {"settings": settings, "min_df": min_df}
    expected = run_cli(cli, texts, cli_args(settings, min_df), tmp_path)
    assert neardup.Idf.build(texts, **build_kwargs(case)).to_bytes() == expected
    # What Python writes, the CLI's fingerprinter reads (and the other way round).
    assert neardup.Idf.load(tmp_path / "out.idf").to_bytes() == expected


def test_pins_are_the_cli_s(cli, tmp_path):
    for case in PINNED["cases"]:
        assert run_cli(cli, PINNED["texts"], case["args"], tmp_path).hex() == case["table"]


def regenerate_pins(cli, path=VECTORS / "idf_cli.json"):
    """Rewrites tests/vectors/idf_cli.json with `cli` (python -c 'import test_idf as t;
    t.regenerate_pins(t.find_cli())' in this folder)."""
    import tempfile
    texts = corpus(random.Random(2024), 40)
    cases = []
    for settings, min_df in [({}, None), ({"window": 1}, 1), ({"tokenizer": "char:3", "window": 1}, 3),
                             ({"window": 3, "lowercase": False}, 1)]:
        args = cli_args(settings, min_df)
        with tempfile.TemporaryDirectory() as tmp:
            table = run_cli(cli, texts, args, Path(tmp)).hex()
        cases.append({"args": args, "settings": settings, "min_df": min_df, "table": table})
    path.write_text(json.dumps({"texts": texts, "cases": cases}, ensure_ascii=False, indent=1)
                    + "\n", encoding="utf-8")


# --- reading, writing and using tables ----------------------------------------------------


def test_round_trips(tmp_path):
    texts = corpus(random.Random(3), 200)
    idf = neardup.Idf.build(texts, min_df=1)
    data = idf.to_bytes()
    assert isinstance(data, bytes)
    for form in [data, bytearray(data), memoryview(data)]:
        again = neardup.Idf.from_bytes(form)
        assert again.to_bytes() == data and again.docs == idf.docs and len(again) == len(idf)
    idf.save(tmp_path / "t.idf")
    assert (tmp_path / "t.idf").read_bytes() == data
    idf.save(str(tmp_path / "t.idf"))  # replaces it
    assert neardup.Idf.load(str(tmp_path / "t.idf")).to_bytes() == data
    assert neardup.Idf.load(tmp_path / "t.idf").to_bytes() == data


def test_fingerprinter_takes_a_table_every_way(tmp_path):
    texts = corpus(random.Random(4), 300)
    idf = neardup.Idf.build(texts, min_df=1)
    idf.save(tmp_path / "t.idf")
    made = [neardup.Fingerprinter(idf=idf),
            neardup.Fingerprinter(weighting="tfidf", idf=idf),
            neardup.Fingerprinter(idf=idf.to_bytes()),
            neardup.Fingerprinter(idf=tmp_path / "t.idf"),
            neardup.Fingerprinter(idf=str(tmp_path / "t.idf"))]
    probe = texts[:50]
    expected = made[0].fingerprint_many(probe)
    for fp in made:
        assert fp.fingerprint_many(probe) == expected
        assert "weighting='tfidf'" in repr(fp)
    # The weights do something: rare features pull the fingerprint.
    tf = neardup.Fingerprinter().fingerprint_many(probe)
    assert sum(a != b for a, b in zip(expected, tf)) > 10


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("texts, kwargs, error, message", [
    ("a str", {}, TypeError, "not a str"),
    (5, {}, TypeError, "iterable of str, got int"),
    (["ok", 3], {}, TypeError, r"texts\[1\] must be a str, got int"),
    (["ok"] * 5000 + [b"bytes"], {}, TypeError, r"texts\[5000\]"),
    (["ok"], {"min_df": -1}, ValueError, "min_df must be between 0 and 4294967295, got -1"),
    (["ok"], {"min_df": 2**32}, ValueError, "min_df"),
    (["ok"], {"min_df": "2"}, TypeError, "min_df must be an int"),
    (["ok"], {"fingerprinter": "words"}, TypeError, "fingerprinter"),
])
def test_build_errors(texts, kwargs, error, message):
    with pytest.raises(error, match=message):
        neardup.Idf.build(texts, **kwargs)


def test_build_options_are_keywords_and_iterator_errors_propagate():
    with pytest.raises(TypeError):
        neardup.Idf.build(["a"], 1)

    def failing():
        yield "a b"
        raise RuntimeError("reading failed")

    with pytest.raises(RuntimeError, match="reading failed"):
        neardup.Idf.build(failing())
    with pytest.raises(TypeError, match="cannot create"):
        neardup.Idf()


def test_from_bytes_errors():
    good = neardup.Idf.build(["a b", "a b"]).to_bytes()
    for bad, message in [(b"", "not an idf table"),
                         (b"nonsense" * 4, "not an idf table"),
                         (good[:20], "truncated header"),
                         (good[:-1], "length does not match"),
                         (good + b"\0", "length does not match"),
                         # One feature in 3 documents of 2.
                         (good[:-4] + struct.pack("<I", 3), "exceeds the document count")]:
        with pytest.raises(ValueError, match=message):
            neardup.Idf.from_bytes(bad)
    with pytest.raises(TypeError, match=r"Idf.load\(path\)"):
        neardup.Idf.from_bytes("table.idf")
    with pytest.raises(TypeError, match="expects bytes, not int"):
        neardup.Idf.from_bytes(5)


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot read idf table '.*missing.idf'"):
        neardup.Idf.load(tmp_path / "missing.idf")
    with pytest.raises(IsADirectoryError, match="cannot read idf table"):
        neardup.Idf.load(tmp_path)
    (tmp_path / "bad.idf").write_bytes(b"NDUPIDF1")
    with pytest.raises(ValueError, match="'.*bad.idf': invalid idf table: truncated header"):
        neardup.Idf.load(tmp_path / "bad.idf")
    with pytest.raises(TypeError):
        neardup.Idf.load(5)
    idf = neardup.Idf.build([])
    with pytest.raises(FileNotFoundError, match="cannot write idf table"):
        idf.save(tmp_path / "no" / "such" / "dir.idf")
    with pytest.raises(IsADirectoryError, match="cannot write idf table"):
        idf.save(tmp_path)
    # The same messages through the Fingerprinter.
    with pytest.raises(FileNotFoundError, match="cannot read idf table"):
        neardup.Fingerprinter(idf=tmp_path / "missing.idf")
    with pytest.raises(ValueError, match="bad.idf"):
        neardup.Fingerprinter(idf=str(tmp_path / "bad.idf"))


def test_idf_and_fingerprinter_argument_errors():
    idf = neardup.Idf.build(["a b"])
    with pytest.raises(OverflowError, match="feature -1 is outside"):
        idf.idf(-1)
    with pytest.raises(OverflowError, match="feature"):
        idf.idf(2**64)
    with pytest.raises(TypeError):
        idf.idf("a b")
    with pytest.raises(TypeError, match="idf must be an Idf, bytes or a path, got int"):
        neardup.Fingerprinter(idf=5)
    with pytest.raises(ValueError, match="not both"):
        neardup.Fingerprinter(idf=idf, weights={"a": 1.0})
    with pytest.raises(ValueError, match='for weighting .custom. and .tfidf., not "tf"'):
        neardup.Fingerprinter(weighting="tf", idf=idf)
    with pytest.raises(TypeError, match="str"):
        neardup.Fingerprinter().feature_set(b"bytes")

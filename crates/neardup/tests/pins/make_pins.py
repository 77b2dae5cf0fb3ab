#!/usr/bin/env python3
"""Computes pins.json: fingerprints of fixed texts under fixed configurations, by an
independent implementation of the documented format (fingerprint/mod.rs, VERSION 2), with
Python's unicodedata and the `xxhash` package (pip install xxhash). The Rust test
tests/fingerprint_pins.rs checks neardup gives exactly these values: a change to any of them
is a change of the stored format, and must bump fingerprint::VERSION.

The texts avoid the places where UAX #29 word boundaries and Python's \\w+ differ (no
apostrophes, dots or colons inside words, no underscores, no Han or Kana), so that \\w+ can
stand in for Unicode words here.
"""
import json
import math
import os
import re
import struct
import unicodedata

import xxhash

SEED = int.from_bytes(b"neardup1", "little")
VOTE_MAX = 1023.0


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


QUOTES = {"\u2018": "'", "\u2019": "'", "\u201b": "'", "\u2032": "'", "\u02bc": "'",
          "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"'}


def normalize(text, tokenizer):
    text = unicodedata.normalize("NFKC", text)
    text = "".join(QUOTES.get(c, c) for c in text).lower()
    if tokenizer[0] == "char":
        text = " ".join(text.split())
    return text


def tokens(text, tokenizer):
    kind = tokenizer[0]
    if kind == "words":
        return re.findall(r"\w+", text)
    if kind == "ascii":
        return re.findall(r"[A-Za-z]+", text)
    if kind == "char":
        n = tokenizer[1]
        if not text:
            return []
        return [text] if len(text) < n else [text[i:i + n] for i in range(len(text) - n + 1)]
    raise ValueError(kind)


def h(b):
    return xxhash.xxh3_64_intdigest(b, seed=SEED)


def features(toks, window):
    th = [h(t.encode()) for t in toks]
    if window == 1 or not th:
        return th, [[t] for t in toks]
    span = min(window, len(th))
    n = 1 if len(th) < window else len(th) - window + 1
    feats = [h(b"".join(x.to_bytes(8, "little") for x in th[i:i + span])) for i in range(n)]
    return feats, [toks[i:i + span] for i in range(n)]


def simhash_weighted(pairs):
    total = sum(w for _, w in pairs)
    out = 0
    for i in range(64):
        ones = sum(w for f, w in pairs if (f >> i) & 1)
        if 2 * ones > total:
            out |= 1 << i
    return out


def lane_hash(f, lane):
    """A feature hash as lane `lane` of a wide fingerprint sees it."""
    return f if lane == 0 else xxhash.xxh3_64_intdigest(f.to_bytes(8, "little"), seed=SEED + lane)


def wide(text, tokenizer, window, weighting):
    """The four lanes of the 256-bit fingerprint: the same votes, each lane's own hash."""
    return [simhash_weighted([(lane_hash(f, lane), w) for f, w in votes(text, tokenizer, window, weighting)])
            for lane in range(4)]


def fingerprint(text, tokenizer, window, weighting):
    return simhash_weighted(votes(text, tokenizer, window, weighting))


def votes(text, tokenizer, window, weighting):
    toks = tokens(normalize(text, tokenizer), tokenizer)
    feats, members = features(toks, window)
    if weighting[0] == "none":
        return [(f, 1) for f in feats]
    counts, first = {}, {}
    for i, f in enumerate(feats):
        counts[f] = counts.get(f, 0) + 1
        first.setdefault(f, i)
    votes = []
    for f in sorted(counts):
        c = f32(counts[f])
        tf = f32(1.0 + f32(math.log(c)))
        m = members[first[f]]
        if weighting[0] == "tf":
            w = tf
        elif weighting[0] == "custom":
            table = weighting[1]
            tw = f32(0.0)
            for t in m:
                tw = f32(tw + f32(f32(table.get(t, 1.0)) / f32(len(m))))
            w = f32(tf * tw)
        elif weighting[0] == "lenpos":
            lam = f32(weighting[1])
            ln = f32(0.0)
            for t in m:
                ln = f32(ln + f32(f32(1.0 if len(t) >= 4 else 0.0) / f32(len(m))))
            w = f32(c + f32(lam * f32(ln)))
        else:
            raise ValueError(weighting)
        votes.append((f, w))
    mx = max((w for _, w in votes), default=0.0)
    if mx <= 0:
        return []
    return [(f, int(math.floor(f32(f32(w / mx) * VOTE_MAX) + 0.5))) for f, w in votes]


CASES = [
    ("default (words, window 2, tf)", "The quick brown fox jumps over the lazy dog, then sleeps in the sun; the fox is quick.", ("words",), 2, ("tf",)),
    ("words window 3", "The quick brown fox jumps over the lazy dog, then sleeps in the sun.", ("words",), 3, ("none",)),
    ("words window 3, unicode", "Ünïcödé façade, naïve café; the ﬁnal ＦＵＬＬ width test of NFKC", ("words",), 3, ("none",)),
    ("short", "hello world", ("words",), 3, ("none",)),
    ("typographic quotes", "“Quoted” words ‘here’ and “there”, he said", ("words",), 2, ("tf",)),
    ("empty", "", ("words",), 3, ("none",)),
    ("tf window 1", "a rose is a rose is a rose and more roses", ("words",), 1, ("tf",)),
    ("tf window 2", "a rose is a rose is a rose and more roses", ("words",), 2, ("tf",)),
    ("ascii letters", "In 2024 e-mail me at foo@bar.com or call 555-0100", ("ascii",), 2, ("none",)),
    ("char 3-grams", "Near  duplicate\tdetection\n with   simhash", ("char", 3), 1, ("none",)),
    ("char 2-grams unicode", "Ωμέγα και Άλφα, Москва и Киев", ("char", 2), 1, ("none",)),
    ("custom", "a rose is a rose is a rose and more roses", ("words",), 1, ("custom", {"rose": 3.0, "is": 0.5, "a": 0.0})),
    ("lenpos", "international cooperation is essential for sustainable development of all nations", ("words",), 1, ("lenpos", 0.5)),
]


def main():
    out = []
    for name, text, tokenizer, window, weighting in CASES:
        out.append({
            "name": name, "text": text, "tokenizer": list(tokenizer), "window": window,
            "weighting": [weighting[0]] + list(weighting[1:]),
            "fingerprint": str(fingerprint(text, tokenizer, window, weighting)),
            "wide": [str(x) for x in wide(text, tokenizer, window, weighting)],
        })
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pins.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generates a large synthetic corpus with planted near-duplicates, for scale tests of
`neardup dedup` (plain Python 3, standard library; the `zstd` program for .zst output).

  python3 scripts/make_corpus.py --docs 10000000 --out /big/corpus.jsonl.zst \\
      --truth /big/truth.jsonl [--seed 1] [--dup-rate 0.1] [--doc-bytes 2000]

Output: one JSON line per document, {"id": "doc/<n>", "text": "..."}, n = 0 .. docs-1 in
file order. Text comes from examples/kjv.jsonl (the King James Bible, written by
scripts/kjv_example.py; --source for another file): its chapters are split into sentences
once, and every *base* document is a random selection of sentences (about --doc-bytes bytes,
default 2000), put back in reading order; sentences over 300 characters are first cut at
; : or , into shorter pieces (~31,500 distinct pieces in all). A random selection rather than
a run of consecutive sentences, because with millions of documents overlapping runs would
make countless unplanted near-duplicates, while two random selections share a few short
sentences at most: in 100,000 base documents no two share more than 3 pieces and the highest
word-5-shingle Jaccard is 0.18 (at 10M documents, extrapolated, roughly 0.35 at most).

About --dup-rate (default 0.1) of the documents are instead edited *copies* of an earlier
base document, chosen uniformly, each base copied at most once. A copy gets one edit kind,
or two different kinds applied in order ("insert+move"), from the same kinds as the peer
harness's gen_data.py: boilerplate (a navigation line on top, a footer below), insert (2..5
filler words), delete (2..5 words), move (one sentence moved), replace (3% of the words by
other words of the text), format (re-wrapped lines, typographic quotes and dashes). Ids are
doc/<n> for copies too, so they do not give the answer away.

--truth gets one line per planted pair, in the order the copies were written:
{"a": id, "b": id, "kind": "replace", "jaccard": 0.7431}, a < b as strings, jaccard = exact
Jaccard similarity of the two texts' word 5-shingles (lowercased \\w+ tokens, five at a time),
rounded to 4 places. Only planted pairs are listed: natural near-duplicates between base
documents are vanishingly rare by construction (see above), not searched for.

If --out ends with .zst the lines are piped through `zstd -q -f -T0 -3 -o FILE`, so a
10M-document corpus (~20 GB of JSON) never touches the disk uncompressed. Deterministic: the
same arguments give the same bytes (a base document's sentences are a function of --seed and
its number only, so a copy regenerates its original instead of keeping it in memory). A
one-line summary goes to stderr at the end: docs, copies, MB (uncompressed), seconds.

Speed: about 10,000 documents per CPU second; --jobs (default: all cores) worker processes
make chunks of 2,000 documents in parallel and the output does not depend on --jobs. With 2
cores, ~18,000 docs/s into zstd: 10M documents in about 10 minutes, ~5.6 GB compressed.
"""
import argparse
import collections
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time

MASK = (1 << 64) - 1


# ---------------------------------------------------------------------------------------------
# Copied from the peer harness's gen_data.py (/work/shared/peers/gen_data.py): SplitMix64,
# the edit kinds, boilerplate lines, shingles(), jaccard(), splice() and edit(). Changed for
# speed only, with the same results: precompiled regexes, edit() finds word spans only for the
# kinds that use them, fill() replaces textwrap.fill(), shingles are tuples of five tokens rather than the tokens joined by
# spaces (the same sets up to renaming, since tokens contain no spaces: the same Jaccard).
class SplitMix64:
    def __init__(self, seed):
        self.x = seed

    def next(self):
        self.x = (self.x + 0x9E3779B97F4A7C15) & MASK
        z = self.x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, m):
        return (self.next() * m) >> 64

    def sample(self, lo, hi, k):
        """k distinct integers from [lo, hi), by a partial Fisher-Yates shuffle."""
        pool = list(range(lo, hi))
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]


KINDS = ["boilerplate", "insert", "delete", "move", "replace", "format"]
HEADERS = ["Home | About | Archive | Contact | Search", "Skip to main content  Menu  Home  Library  Sign in",
           "Home > Texts > Classics > Reader view", "The Daily Reader: Latest · Popular · Newsletter · Subscribe"]
FOOTERS = ["Copyright © 2024 Example Media. All rights reserved. Privacy Policy | Terms of Use",
           "Share this: Facebook Twitter Email Print", "Posted in Reading | 3 Comments | Permalink",
           "Back to top. Powered by WordPress. Theme by Example Themes."]
FILLERS = "very indeed really also then truly quite all now still just even much often again".split()
WORD = re.compile(r"\w+")
SENTENCE_SPLIT = re.compile(r"((?<=[.!?])\s+)")
LINE_SPLIT = re.compile(r"(\n+)")
OPEN_QUOTE = re.compile(r'"(?=\w)')


def shingles(text):
    """Word 5-shingles: lowercased \\w+ tokens, five at a time."""
    t = WORD.findall(text.lower())
    return set(zip(t, t[1:], t[2:], t[3:], t[4:]))


def jaccard(a, b):
    i = len(a & b)
    return i / (len(a) + len(b) - i) if a or b else 1.0


def splice(text, edits):
    """text with non-overlapping (start, end, replacement) edits applied."""
    for s, e, r in sorted(edits, reverse=True):
        text = text[:s] + r + text[e:]
    return text


def edit(rng, text, kind):
    if kind in ("insert", "delete", "replace"):
        w = [m.span() for m in WORD.finditer(text)]
    pick = lambda seq: seq[rng.below(len(seq))]
    if kind == "boilerplate":  # a navigation line on top, a footer line below
        return f"{pick(HEADERS)}\n\n{text}\n\n{pick(FOOTERS)}"
    if kind == "insert":  # 2..5 filler words, each before a random word
        return splice(text, [(w[i][0], w[i][0], pick(FILLERS) + " ")
                             for i in rng.sample(0, len(w), 2 + rng.below(4))])
    if kind == "delete":  # 2..5 random words, with the space before them
        return splice(text, [(w[i][0] - (text[w[i][0] - 1:w[i][0]] == " "), w[i][1], "")
                             for i in rng.sample(0, len(w), 2 + rng.below(4))])
    if kind == "replace":  # 3% of the words, each by another word of the same text
        edits = []
        for i in rng.sample(0, len(w), max(1, round(0.03 * len(w)))):
            old = new = text[w[i][0]:w[i][1]]
            while new.lower() == old.lower():
                s, e = pick(w)
                new = text[s:e].lower()
            edits.append((*w[i], new.capitalize() if old[0].isupper() else new))
        return splice(text, edits)
    if kind == "move":  # one sentence (a line if < 3 sentences) moved elsewhere, with the space after it
        parts = SENTENCE_SPLIT.split(text)
        if len(parts) < 5 and "\n" in text:
            parts = LINE_SPLIT.split(text)
        units = [s + p for s, p in zip(parts[0::2], parts[1::2] + [" "])]
        i, j = rng.below(len(units)), rng.below(max(1, len(units) - 1))
        units.insert(j + (j >= i), units.pop(i))
        return "".join(units).rstrip()
    if kind == "format":  # re-wrapped lines, typographic dashes and quotes; the same words
        t = " ".join(text.split()).replace("--", "—").replace("...", "…").replace("'", "’")
        t = OPEN_QUOTE.sub("“", t).replace('"', "”")
        return fill(t, 50 + rng.below(40))
    raise ValueError(kind)


def fill(t, width):
    """textwrap.fill(t, width, break_long_words=False, break_on_hyphens=False) for a text of
    words separated by single spaces (as edit() makes it), several times faster."""
    lines, cur, n = [], [], -1
    for w in t.split(" "):
        if cur and n + 1 + len(w) > width:
            lines.append(" ".join(cur))
            cur, n = [], -1
        cur.append(w)
        n += 1 + len(w)
    lines.append(" ".join(cur))
    return "\n".join(lines)
# ---------------------------------------------------------------------------------------------


def load_sentences(path, max_len=300):
    """The source's sentences (split after . ! ?), unique, in reading order. Sentences longer than
    max_len characters are cut after ; or : (then after commas) into pieces of at most max_len,
    the rest dropped: a long shared sentence would make two random documents similar."""
    seen, out = set(), []
    with open(path, encoding="utf-8") as f:
        for line in f:
            for s in re.split(r"(?<=[.!?])\s+", json.loads(line)["text"]):
                for p in cut(" ".join(s.split()), max_len, [r"(?<=[;:])\s+", r"(?<=,)\s+"]):
                    if p not in seen:
                        seen.add(p)
                        out.append(p)
    return out


def cut(s, max_len, seps):
    """s as pieces of at most max_len characters, split at the first of seps that does it."""
    if len(s) <= max_len:
        return [s] if s else []
    if not seps:
        return []
    out, cur = [], ""
    for part in re.split(seps[0], s):
        if cur and len(cur) + 1 + len(part) > max_len:
            out += cut(cur, max_len, seps[1:])
            cur = part
        else:
            cur = f"{cur} {part}" if cur else part
    return out + cut(cur, max_len, seps[1:])


class Writer:
    """Byte sink: a plain file, or zstd reading a pipe for FILE.zst."""

    def __init__(self, path):
        self.proc = None
        if path.endswith(".zst"):
            if not shutil.which("zstd"):
                sys.exit("make_corpus.py: .zst output needs the zstd program (apt-get install zstd)")
            self.proc = subprocess.Popen(["zstd", "-q", "-f", "-T0", "-3", "-o", path],
                                         stdin=subprocess.PIPE)
            self.f = self.proc.stdin
        else:
            self.f = open(path, "wb")
        self.bytes = 0

    def write(self, data):
        self.bytes += len(data)
        self.f.write(data)

    def close(self):
        self.f.close()
        if self.proc and self.proc.wait() != 0:
            sys.exit(f"make_corpus.py: zstd failed with exit code {self.proc.returncode}")


S = {}  # sentence tables and keys, set by main() before worker processes are forked


def base(n):
    """Sentence numbers of base document n, sorted: a function of (seed, n) only."""
    lens, nsent, target = S["lens"], S["nsent"], S["target"]
    z = (S["key"] + (n + 1) * 0x9E3779B97F4A7C15) & MASK  # splitmix64 of n: the start state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    picks, total = [], 0
    while total < target:
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK  # 64-bit LCG, high bits
        i = ((x >> 32) * nsent) >> 32
        if i not in picks:
            picks.append(i)
            total += lens[i]
    picks.sort()
    return picks


def make_chunk(lo, hi, plan):
    """Documents lo .. hi-1 as (JSONL bytes, truth JSONL text); plan maps copies to originals."""
    raw, esc = S["raw"], S["esc"]
    lines, truth = [], []
    for n in range(lo, hi):
        orig = plan.get(n, -1)
        if orig < 0:  # the hot path: sentences are JSON-escaped already
            lines.append('{"id": "doc/%d", "text": "%s"}\n' % (n, " ".join([esc[i] for i in base(n)])))
            continue
        rng = SplitMix64((S["key2"] + n * 0xD1B54A32D192ED03) & MASK)  # edits: a function of (seed, n)
        text = " ".join([raw[i] for i in base(orig)])
        c = rng.below(len(KINDS) + 1)
        if c < len(KINDS):
            kinds = [KINDS[c]]
        else:  # two different kinds, applied in KINDS order
            x, y = rng.below(len(KINDS)), rng.below(len(KINDS) - 1)
            kinds = [KINDS[i] for i in sorted((x, y + (y >= x)))]
        copy = text
        for kind in kinds:
            copy = edit(rng, copy, kind)
        lines.append(json.dumps({"id": f"doc/{n}", "text": copy}, ensure_ascii=False) + "\n")
        ida, idb = sorted((f"doc/{orig}", f"doc/{n}"))
        truth.append(json.dumps({"a": ida, "b": idb, "kind": "+".join(kinds),
                                 "jaccard": round(jaccard(shingles(text), shingles(copy)), 4)}) + "\n")
    return "".join(lines).encode("utf-8"), "".join(truth)


def plans(docs, seed, dup_rate, chunk):
    """(lo, hi, {copy: original}) per chunk of documents: which documents are copies, of what.
    Sequential (one random stream), cheap; the documents themselves are made in parallel."""
    rng = SplitMix64(seed)
    threshold = int(dup_rate * 2**64)
    copied = bytearray(docs)  # 1: a copy, or a base document copied already
    for lo in range(0, docs, chunk):
        hi, plan = min(lo + chunk, docs), {}
        for n in range(max(lo, 1), hi):
            if rng.next() < threshold:
                for _ in range(32):  # an earlier base document not copied yet (give up if unlucky)
                    k = rng.below(n)
                    if not copied[k]:
                        plan[n] = k
                        copied[k] = copied[n] = 1
                        break
        yield lo, hi, plan


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, required=True, help="number of documents")
    ap.add_argument("--out", required=True, help="output JSONL (zstd-compressed if it ends with .zst)")
    ap.add_argument("--truth", required=True, help="output JSONL of the planted pairs")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--dup-rate", type=float, default=0.1, help="fraction of documents that are edited copies")
    ap.add_argument("--doc-bytes", type=int, default=2000, help="approximate size of a base document")
    ap.add_argument("--source", default=os.path.join(root, "examples", "kjv.jsonl"),
                    help="JSONL {id, text} to take sentences from (default examples/kjv.jsonl)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="worker processes (default: all cores); the output does not depend on it")
    a = ap.parse_args()
    if a.docs < 1 or not 0 <= a.dup_rate < 1 or a.doc_bytes < 1 or a.jobs < 1:
        ap.error("need --docs >= 1, 0 <= --dup-rate < 1, --doc-bytes >= 1 and --jobs >= 1")
    t0 = time.time()

    raw = load_sentences(a.source)
    if len(raw) < 2:
        sys.exit(f"make_corpus.py: too few sentences in {a.source}")
    S.update(raw=raw, esc=[json.dumps(s, ensure_ascii=False)[1:-1] for s in raw],
             lens=[len(s.encode()) + 1 for s in raw], nsent=len(raw), target=a.doc_bytes,
             key=SplitMix64(a.seed ^ 0x5DEECE66D).next(), key2=SplitMix64(a.seed ^ 0x2545F491).next())

    out, truth = Writer(a.out), open(a.truth, "w", encoding="utf-8", newline="\n")
    copies = 0
    tasks = plans(a.docs, a.seed, a.dup_rate, 2000)
    if a.jobs == 1:
        results = (make_chunk(*t) for t in tasks)
    else:  # ordered results, at most 2 * jobs chunks in flight
        pool = multiprocessing.get_context("fork").Pool(a.jobs)
        pending = collections.deque()

        def ordered():
            for t in tasks:
                pending.append(pool.apply_async(make_chunk, t))
                if len(pending) >= 2 * a.jobs:
                    yield pending.popleft().get()
            while pending:
                yield pending.popleft().get()
        results = ordered()
    for data, tr in results:
        out.write(data)
        truth.write(tr)
        copies += tr.count("\n")
    if a.jobs > 1:
        pool.close()
        pool.join()
    out.close()
    truth.close()
    secs = time.time() - t0
    print(f"make_corpus.py: {a.docs} docs ({copies} copies, {a.docs - copies} base), {out.bytes / 1e6:.1f} MB "
          f"uncompressed, {secs:.1f} s ({a.docs / secs:,.0f} docs/s) -> {a.out}, {a.truth}", file=sys.stderr)


if __name__ == "__main__":
    main()

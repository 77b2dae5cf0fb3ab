#!/usr/bin/env python3
"""A second natural corpus for fingerprinting and dedup speed (docs/benchmarks.md, "Side by
side"): man pages (every language under /usr/share/man), /usr/share/doc/*/copyright, and
the HTML docs of a rustup toolchain (std, the books, cargo...), one document per file, text
extracted as ../shared/natural's build does it (its extract.py: roff and rustdoc HTML to
text), at least 50 words each, a fixed-seed sample, shuffled.

  python3 scripts/man_rust_corpus.py [OUT_DIR]    # default /tmp/man-rust: corpus.jsonl, manifest.json

NATURAL_DIR names the folder of extract.py (default ../shared/natural, from the project
root); RUST_DOCS the toolchain's share/doc/rust/html (default: the first under ~/.rustup).
Debian 12 with rust 1.95.0 gave 13,806 documents, 65.1 MB (9,000 man pages, 728 copyright
files, 4,078 Rust pages)."""
import glob, json, os, random, re, sys
sys.path.insert(0, os.environ.get("NATURAL_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "natural")))
import extract

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/man-rust"
SEED = 44
MIN_WORDS = 50
WORD = re.compile(r"\w+")
CAPS = {"man": 9000, "rust": 5000}

def man():
    out = []
    for root, dirs, files in os.walk("/usr/share/man"):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            if not os.path.islink(p):
                out.append(("man", p))
    return out

def copyright():
    return [("copyright", p) for p in sorted(glob.glob("/usr/share/doc/*/copyright")) if not os.path.islink(p)]

def rust():
    root = os.environ.get("RUST_DOCS") or sorted(glob.glob(os.path.expanduser("~/.rustup/toolchains/*/share/doc/rust/html")))[0]
    out = []
    for r, dirs, files in os.walk(root):
        dirs.sort()
        if "/src/" in r + "/" or "static.files" in r:
            continue
        for f in sorted(files):
            if f.endswith(".html"):
                out.append(("rust", os.path.join(r, f)))
    return out

def text(kind, p):
    try:
        if kind == "man":
            raw = extract.read_man(p)
            if extract.is_so_redirect(raw):
                return None
            return extract.roff_text(raw)
        raw = open(p, "rb").read().decode("utf-8", errors="replace")
        if kind == "rust":
            if "http-equiv=\"refresh\"" in raw[:2000]:
                return None
            return extract.html_text(raw)
        return extract.plain_text(raw)
    except Exception as e:
        print("skip", p, e, file=sys.stderr)
        return None

rng = random.Random(SEED)
docs = []
for kind, files in (("man", man()), ("copyright", copyright()), ("rust", rust())):
    if kind in CAPS and len(files) > CAPS[kind] * 2:
        files = rng.sample(files, CAPS[kind] * 2)
    kept = []
    for k, p in files:
        t = text(k, p)
        if t and len(WORD.findall(t)) >= MIN_WORDS:
            kept.append((k + ":" + p, t))
        if kind in CAPS and len(kept) >= CAPS[kind]:
            break
    print(kind, len(files), "->", len(kept), file=sys.stderr)
    docs.extend(kept)
rng.shuffle(docs)
os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "corpus.jsonl"), "w") as f:
    for i, t in docs:
        f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
n = sum(len(t.encode()) for _, t in docs)
json.dump({"files": {"corpus": "corpus.jsonl"}, "documents": len(docs), "bytes": n}, open(os.path.join(OUT, "manifest.json"), "w"))
print(len(docs), "docs", n / 1e6, "MB", file=sys.stderr)

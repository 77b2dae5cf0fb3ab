#!/usr/bin/env python3
"""Writes a corpus of real text in one language, as JSON Lines {"id", "text"}: the
translated messages of the machine's gettext catalogs (/usr/share/locale/LANG/LC_MESSAGES/
*.mo, which most Linux packages install), grouped into documents of about 2,000
characters. Every script the machine has translations in: Hindi (hi), Bengali (bn),
Tamil (ta), Thai (th), Khmer (km), Myanmar (my), Hebrew (he), Arabic (ar), Russian (ru)...

  scripts/locale_corpus.py hi > hi.jsonl
  cargo run --release -p neardup --example sketch_speed -- wide hi.jsonl 5

With --copies (and --truth FILE), each document is followed at the end by a near-copy of
it with a share of its letters (--change, 2% by default) replaced by other letters of the
same document, id "<id>/copy"; FILE gets one JSON line {"a": original, "b": copy} per copy.
Seeded (--seed), so reruns match.

  scripts/locale_corpus.py th --copies --truth planted.jsonl > th-copies.jsonl
  neardup dedup th-copies.jsonl --pairs pairs.jsonl -q
"""
import argparse
import gettext
import glob
import json
import random
import sys


def messages(lang):
    out = []
    files = sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"))
    if not files:
        sys.exit(f"no catalogs in /usr/share/locale/{lang}/LC_MESSAGES")
    for path in files:
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, UnicodeDecodeError, gettext.error) as e:
            print(f"{path}: skipped ({e})", file=sys.stderr)
            continue
        # The header (key "") is metadata, not text.
        out.extend(v for k, v in catalog.items() if k and isinstance(v, str) and v.strip())
    return out


def documents(lang):
    docs, buf = [], []
    for m in messages(lang):
        buf.append(m)
        if sum(map(len, buf)) > 2000:
            docs.append((f"{lang}/{len(docs)}", "\n".join(buf)))
            buf = []
    return docs


def copy_of(text, change, rnd):
    chars = list(text)
    letters = [i for i, c in enumerate(chars) if c.isalpha()]
    pool = [chars[i] for i in letters]
    for i in rnd.sample(letters, max(1, int(len(letters) * change))) if letters else []:
        chars[i] = rnd.choice(pool)
    return "".join(chars)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lang", help="a directory of /usr/share/locale: hi, th, ru, zh_CN...")
    ap.add_argument("--copies", action="store_true", help="add a near-copy of every document")
    ap.add_argument("--change", type=float, default=0.02, help="share of a copy's letters replaced")
    ap.add_argument("--truth", help="where to write the planted pairs (with --copies)")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    docs = documents(args.lang)
    for id_, text in docs:
        print(json.dumps({"id": id_, "text": text}, ensure_ascii=False))
    if not args.copies:
        return
    rnd = random.Random(args.seed)
    truth = open(args.truth, "w") if args.truth else None
    for id_, text in docs:
        copy = f"{id_}/copy"
        print(json.dumps({"id": copy, "text": copy_of(text, args.change, rnd)}, ensure_ascii=False))
        if truth:
            truth.write(json.dumps({"a": id_, "b": copy}) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a Chinese corpus for fingerprinting benchmarks, as JSON Lines {"id", "text"}:
the fortunes of Debian's fortunes-zh package (Chinese sayings and prose, Tang and Song
poems), grouped into documents of about 2 KB, as the peer harness groups the English
fortunes.

  apt-get install fortunes-zh
  scripts/cjk_corpus.py > cjk.jsonl
  neardup bench fingerprint --input cjk.jsonl --tokenizer jieba

With --copies N (and --truth FILE), N planted near-duplicates follow the documents: a copy
of a random document with 2% of its Chinese characters replaced by other characters of the
corpus and one of its lines dropped (about 98% the same text), id "copy/K/of/<id>"; FILE
gets one JSON line {"a": original, "b": copy} per copy. Seeded (--seed), so reruns match.

  scripts/cjk_corpus.py --copies 300 --truth planted.jsonl > cjk-copies.jsonl
  neardup dedup cjk-copies.jsonl --pairs pairs.jsonl -q
"""
import argparse
import json
import os
import random
import sys

FILES = ["chinese", "tang300", "song100"]
DIR = "/usr/share/games/fortunes"


def documents():
    out, buf, n = [], [], 0
    for name in FILES:
        path = os.path.join(DIR, name)
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: apt-get install fortunes-zh")
        with open(path, encoding="utf-8", errors="replace") as f:
            fortunes = [t.strip() for t in f.read().split("\n%\n") if t.strip()]
        for t in fortunes:
            buf.append(t)
            if sum(len(x.encode()) for x in buf) >= 2048:
                out.append((f"fortunes-zh/{name}/{n}", "\n".join(buf)))
                buf, n = [], n + 1
    if buf:
        out.append((f"fortunes-zh/end/{n}", "\n".join(buf)))
    return out


def is_han(c):
    return "\u4e00" <= c <= "\u9fff"


def copy_of(text, alphabet, rnd):
    """The text with one line dropped and 2% of its Chinese characters replaced."""
    lines = text.split("\n")
    if len(lines) > 1:
        del lines[rnd.randrange(len(lines))]
    chars = list("\n".join(lines))
    han = [i for i, c in enumerate(chars) if is_han(c)]
    for i in rnd.sample(han, max(1, len(han) // 50)) if han else []:
        chars[i] = rnd.choice(alphabet)
    return "".join(chars)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=0, help="planted near-duplicates to add")
    ap.add_argument("--truth", help="where to write the planted pairs (with --copies)")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    docs = documents()
    for id_, text in docs:
        print(json.dumps({"id": id_, "text": text}, ensure_ascii=False))
    if not args.copies:
        return
    rnd = random.Random(args.seed)
    alphabet = sorted({c for _, t in docs for c in t if is_han(c)})
    truth = open(args.truth, "w") if args.truth else None
    for k in range(args.copies):
        id_, text = rnd.choice(docs)
        copy = f"copy/{k}/of/{id_}"
        print(json.dumps({"id": copy, "text": copy_of(text, alphabet, rnd)}, ensure_ascii=False))
        if truth:
            truth.write(json.dumps({"a": id_, "b": copy}) + "\n")


if __name__ == "__main__":
    main()

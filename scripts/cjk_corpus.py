#!/usr/bin/env python3
"""Writes a Chinese corpus for fingerprinting benchmarks, as JSON Lines {"id", "text"}:
the fortunes of Debian's fortunes-zh package (Chinese sayings and prose, Tang and Song
poems), grouped into documents of about 2 KB, as the peer harness groups the English
fortunes.

  apt-get install fortunes-zh
  scripts/cjk_corpus.py > cjk.jsonl
  neardup bench fingerprint --input cjk.jsonl --tokenizer jieba
"""
import json
import os
import sys

FILES = ["chinese", "tang300", "song100"]
DIR = "/usr/share/games/fortunes"


def main():
    buf, n = [], 0
    for name in FILES:
        path = os.path.join(DIR, name)
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: apt-get install fortunes-zh")
        with open(path, encoding="utf-8", errors="replace") as f:
            fortunes = [t.strip() for t in f.read().split("\n%\n") if t.strip()]
        for t in fortunes:
            buf.append(t)
            if sum(len(x.encode()) for x in buf) >= 2048:
                print(json.dumps({"id": f"fortunes-zh/{name}/{n}", "text": "\n".join(buf)}, ensure_ascii=False))
                buf, n = [], n + 1
    if buf:
        print(json.dumps({"id": f"fortunes-zh/end/{n}", "text": "\n".join(buf)}, ensure_ascii=False))


if __name__ == "__main__":
    main()

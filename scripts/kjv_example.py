#!/usr/bin/env python3
"""Writes examples/kjv.jsonl: the King James Bible, one JSON line per chapter,
{"id": "Psalms 14", "text": "..."}, in canonical book order (1,189 chapters).

The text is the public-domain King James Version (1611/1769) as shipped by Debian's
bible-kjv-text package, read through the `bible` program of bible-kjv:

  apt-get install bible-kjv        # pulls in bible-kjv-text
  python3 scripts/kjv_example.py   # from the repository root; or pass another output path

`bible -f Gen1:1-Rev22:21` prints one verse a line, "Ge1:1 In the beginning ...": an
abbreviated book name, chapter:verse, one space, the verse. Ids use the full English book
name ("Genesis 1", "2 Kings 19", "Song of Solomon 2"); the text is the chapter's verses
joined by single spaces, without verse numbers (runs of whitespace inside a verse, a couple
of typos in the source, are collapsed to one space). Plain Python, deterministic output.

Some chapters are near duplicates of others in the source itself, which makes this a small
real-world test for `neardup dedup`: Psalms 14 / Psalms 53, 2 Kings 18-20 / Isaiah 36-38,
and others (the books of Kings and Chronicles retell many of the same passages).
"""
import json
import os
import re
import shutil
import subprocess
import sys

# The abbreviations `bible` prints, in canonical order, with the full book names.
BOOKS = [
    ("Ge", "Genesis"), ("Exo", "Exodus"), ("Lev", "Leviticus"), ("Num", "Numbers"),
    ("Deu", "Deuteronomy"), ("Josh", "Joshua"), ("Jdgs", "Judges"), ("Ruth", "Ruth"),
    ("1Sm", "1 Samuel"), ("2Sm", "2 Samuel"), ("1Ki", "1 Kings"), ("2Ki", "2 Kings"),
    ("1Chr", "1 Chronicles"), ("2Chr", "2 Chronicles"), ("Ezra", "Ezra"), ("Neh", "Nehemiah"),
    ("Est", "Esther"), ("Job", "Job"), ("Psa", "Psalms"), ("Prv", "Proverbs"),
    ("Eccl", "Ecclesiastes"), ("SSol", "Song of Solomon"), ("Isa", "Isaiah"), ("Jer", "Jeremiah"),
    ("Lam", "Lamentations"), ("Eze", "Ezekiel"), ("Dan", "Daniel"), ("Hos", "Hosea"),
    ("Joel", "Joel"), ("Amos", "Amos"), ("Obad", "Obadiah"), ("Jonah", "Jonah"),
    ("Mic", "Micah"), ("Nahum", "Nahum"), ("Hab", "Habakkuk"), ("Zep", "Zephaniah"),
    ("Hag", "Haggai"), ("Zec", "Zechariah"), ("Mal", "Malachi"),
    ("Mat", "Matthew"), ("Mark", "Mark"), ("Luke", "Luke"), ("John", "John"),
    ("Acts", "Acts"), ("Rom", "Romans"), ("1Cor", "1 Corinthians"), ("2Cor", "2 Corinthians"),
    ("Gal", "Galatians"), ("Eph", "Ephesians"), ("Phi", "Philippians"), ("Col", "Colossians"),
    ("1Th", "1 Thessalonians"), ("2Th", "2 Thessalonians"), ("1Tim", "1 Timothy"),
    ("2Tim", "2 Timothy"), ("Titus", "Titus"), ("Phmn", "Philemon"), ("Heb", "Hebrews"),
    ("Jas", "James"), ("1Pet", "1 Peter"), ("2Pet", "2 Peter"), ("1Jn", "1 John"),
    ("2Jn", "2 John"), ("3Jn", "3 John"), ("Jude", "Jude"), ("Rev", "Revelation"),
]
NAMES = dict(BOOKS)
VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def chapters():
    """[(id, [verse, ...]), ...] in canonical order."""
    if not shutil.which("bible"):
        sys.exit("kjv_example.py: needs Debian's bible-kjv (apt-get install bible-kjv)")
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                         check=True).stdout
    chs = {}  # insertion-ordered: the program prints in canonical order
    for n, line in enumerate(out.splitlines(), 1):
        m = VERSE.match(line)
        if not m:
            sys.exit(f"kjv_example.py: unexpected line {n} from bible: {line!r}")
        book, ch, _, text = m.groups()
        if book not in NAMES:
            sys.exit(f"kjv_example.py: unknown book abbreviation {book!r} on line {n}")
        chs.setdefault(f"{NAMES[book]} {int(ch)}", []).append(" ".join(text.split()))
    books = list(dict.fromkeys(i.rsplit(" ", 1)[0] for i in chs))
    if books != [name for _, name in BOOKS] or len(chs) != 1189:
        sys.exit(f"kjv_example.py: expected 66 books and 1189 chapters, got {len(books)} and {len(chs)}")
    return list(chs.items())


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "examples", "kjv.jsonl")
    chs = chapters()
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for cid, verses in chs:
            f.write(json.dumps({"id": cid, "text": " ".join(verses)}, ensure_ascii=False) + "\n")
    verses = sum(len(v) for _, v in chs)
    print(f"{path}: {len(chs)} chapters, {verses} verses, {os.path.getsize(path) / 1e6:.2f} MB",
          file=sys.stderr)


if __name__ == "__main__":
    main()

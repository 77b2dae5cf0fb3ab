#!/usr/bin/env python3
"""Computes sketch_pins.json: the Jaccard sketches and band keys of fixed texts, by an
independent implementation of the documented format (jaccard/words.rs and
jaccard/sketch.rs, SKETCH_VERSION 2), with Python's `re` and the `xxhash` package
(pip install xxhash). The Rust test tests/sketch_pins.rs checks neardup gives exactly
these values: a change to any of them is a change of the stored format (the document
store keeps sketches), and must bump jaccard::SKETCH_VERSION.

The words are those of the natural CJK corpus's `cjkwords.uwords`, which is how the format
defines them: in text.lower(), each character of the table ../words/spaceless.json (the
scripts written without spaces) alone, and the other runs of `\\w` characters, literally
as Python's `re` matches them. Version 1 was `re.findall(r"\\w+", text.lower())`.
"""
import json
import os
import random
import re

import xxhash

M = (1 << 64) - 1
SEED = int.from_bytes(b"neardup1", "little")
P = 0x9E3779B97F4A7C15
SHINGLE = 5
SHINGLE_SEED = 0x6A61636361726435
SHORT_SEED = 0x6A61636361726473
BINS = 512
BANDS = 20
BIN_BITS = 9
RANK_MASK = M >> BIN_BITS
TAG_MUL = 0xD6E8FEB86659FD93


def fmix64(h):
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & M
    h ^= h >> 33
    return h


def _spaceless_class():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "words", "spaceless.json")) as f:
        ranges = json.load(f)
    return "".join(f"\\U{a:08X}" if a == b else f"\\U{a:08X}-\\U{b:08X}" for a, b in ranges)


_CLASS = _spaceless_class()
WORD = re.compile(f"[{_CLASS}]|[^\\W{_CLASS}]+")


def shingle_hashes(text):
    words = [xxhash.xxh3_64_intdigest(w.encode(), seed=SEED) for w in WORD.findall(text.lower())]
    out = []
    if len(words) >= SHINGLE:
        for i in range(len(words) - SHINGLE + 1):
            poly = 0
            for w in words[i:i + SHINGLE]:
                poly = (poly * P + w) & M
            out.append(fmix64(poly ^ SHINGLE_SEED))
    elif words:
        poly = 0
        for w in words:
            poly = (poly * P + w) & M
        out.append(fmix64(poly ^ SHORT_SEED ^ len(words)))
    return out


def walks():
    state = 0x6E65617264757032
    out = []
    for _ in range(BINS):
        state = (state + 0x9E3779B97F4A7C15) & M
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        z ^= z >> 31
        out.append((z % BINS, ((z >> 32) % BINS) | 1))
    return out


WALKS = walks()


def value(m, tag):
    return fmix64(m ^ ((tag * TAG_MUL) & M))


def bins(hashes):
    mins = [None] * BINS
    for h in hashes:
        b, rank = h >> (64 - BIN_BITS), h & RANK_MASK
        if mins[b] is None or rank < mins[b]:
            mins[b] = rank
    values = []
    for i, (start, stride) in enumerate(WALKS):
        if mins[i] is not None:
            values.append(value(mins[i], 0))
            continue
        step = 0
        while mins[(start + step * stride) % BINS] is None:
            step += 1
        values.append(value(mins[(start + step * stride) % BINS], step + 1))
    return values


def rows_for(t):
    for r in range(25, 0, -1):
        if 1 - (1 - t ** r) ** BANDS >= 0.9995:
            return r
    return 1


def sketch_and_keys(text, rows):
    hashes = shingle_hashes(text)
    if not hashes:
        return bytes(BINS // 4), [0] * BANDS
    v = bins(hashes)
    codes = [0] * (BINS // 32)
    for i, x in enumerate(v):
        codes[i // 32] |= (x >> 62) << (2 * (i % 32))
    if not any(codes):
        codes[0] = 1
    sketch = b"".join(c.to_bytes(8, "little") for c in codes)
    keys = []
    for j in range(BANDS):
        h = ((j + 1) * P) & M
        for x in v[j * rows:(j + 1) * rows]:
            h = fmix64((((h << 29) | (h >> 35)) & M) ^ x)
        keys.append(max(h >> 32, 1))
    return sketch, keys


def texts():
    rng = random.Random(20261126)
    vocab = ("the of and a to in is was he that it his for with as had on at by not be "
             "this but from they which she or an were her all one we there been their "
             "Naïve café façade Über straße Ωmega résumé coöperate").split()

    def prose(n):
        return " ".join(rng.choice(vocab) for _ in range(n))

    out = [
        ("empty", ""),
        ("no words", "  ,.;!? — “” … "),
        ("one word", "Hello"),
        ("four words", "It was the best"),
        ("five words", "it was the best of"),
        ("capitals", "It WAS the BEST of Times, it was the WORST of times"),
        ("digits and underscores", "snake_case 42 x86_64 3.14159 2026-11-26 id_7 a_b_c d"),
        ("typographic", "“Quoted,” she said — and ‘then’ left… It’s 5 o’clock, isn’t it?"),
        ("accents", "Crème brûlée, naïve café, Ærøskøbing and São Paulo in the façade"),
        ("german", "Die Straße ist groß; ÜBER ALLES heißt es in der Ökonomie"),
        ("greek final sigma", "ΟΔΟΣ ΣΟΦΟΣ ΣΙΣΥΦΟΣ Ὀδυσσεύς ἐν τῇ θαλάσσῃ"),
        ("cyrillic", "Москва — столица России. ПРИВЕТ мир и всем людям"),
        ("han", "中文文本没有空格 但是有标点。日本語のテキスト、そして 한국어 텍스트"),
        ("mixed scripts", "ASCII then ελληνικά then 中文 then English again, five more words"),
        ("long word", "a " + "x" * 70 + " b " + "Y" * 80 + " c d e f"),
        ("long word with accent", "pre " + "é" * 40 + "abc" + "Ä" * 30 + " post one two"),
        ("turkish dotted", "İstanbul IĞDIR ılık ışık and more words here"),
        ("ligatures and width", "ﬁnance ﬂow Ｆｕｌｌ ｗｉｄｔｈ ①②③ ᴬᴮᶜ x² words"),
        ("combining", "e\u0301cole cafe\u0301 n\u0303 a\u0308 words to shingle"),
        ("ten shingles", prose(14)),
        ("three hundred shingles", prose(304)),
        ("two thousand shingles", prose(2004)),
        ("repeats", " ".join(["the same five words again"] * 50)),
    ]
    # A document of English-like prose with some typographic punctuation, as the
    # service's load test uses: about 2 KB.
    para = []
    for i in range(360):
        w = rng.choice(vocab)
        if i % 17 == 16:
            w += rng.choice(["—", "’s", ",", ".", "”", "…"])
        para.append(w.capitalize() if i % 23 == 0 else w)
    out.append(("two kilobytes", " ".join(para)))
    # Scripts written without spaces (SKETCH_VERSION 2): each character a word.
    han = "这是一个关于近似重复文档检测的测试文本我们希望它能够正确地识别出那些几乎相同的文档"
    out += [
        ("chinese", "中文文本没有空格，但是有标点。每个汉字都是一个词：一二三四五六七八九十。"),
        ("chinese two kilobytes", "".join(rng.choice(han) + ("，" if i % 29 == 28 else "")
                                          for i in range(700))),
        ("japanese", "日本語のテキストです。カタカナとひらがな、そしてﾊﾝｶｸｶﾀｶﾅｰﾞﾟも単語です。"),
        ("thai", "ภาษาไทยไม่มีช่องว่างระหว่างคำ แต่มีช่องว่างระหว่างประโยค"),
        ("khmer lao myanmar tibetan", "ភាសាខ្មែរ ພາສາລາວ မြန်မာစာ བོད་ཡིག"),
        ("supplementary han", "𠀀𠀁𪜀𫝀𫠠𬺰𰀀丽 and 々〇〆 marks"),
        ("han among english", "The GNU 工具链 (toolchain) の使い方 is version 2.0 版本 of it"),
    ]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    pins = []
    for name, text in texts():
        cases = []
        for t in (0.5, 0.7, 0.8, 0.9):
            rows = rows_for(t)
            sketch, keys = sketch_and_keys(text, rows)
            cases.append({"threshold": t, "rows": rows, "sketch": sketch.hex(), "keys": keys})
        pins.append({"name": name, "text": text, "shingles": len(set(shingle_hashes(text))),
                     "cases": cases})
    with open(os.path.join(here, "sketch_pins.json"), "w", encoding="utf-8") as f:
        json.dump(pins, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

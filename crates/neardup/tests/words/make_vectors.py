#!/usr/bin/env python3
"""Writes the reference vectors of the multi-script words (tests/words_reference.rs):

  spaceless.json  the SPACELESS table of cjkwords.py, the normative definition of which
                  characters are words on their own;
  words.jsonl     {"text", "words"}: texts and their words by cjkwords.uwords(), hand-picked
                  ones and 2,000 random strings over a pool of characters that sit on every
                  boundary of the table, in and around the spaceless scripts, and the
                  characters whose lowercasing is special.

Usage: python3 make_vectors.py PATH/TO/natural-cjk   (the folder holding cjkwords.py)
Deterministic: a fixed seed, so the files are the same on a rerun.
"""
import json
import os
import random
import sys

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "../shared/natural-cjk")
import cjkwords  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

HAND = [
    "中文文档ABC，カタカナー สวัสดี",
    "这是一个测试。这是一个测试！",
    "日本語のテキストです。ﾊﾝｶｸｶﾀｶﾅｰﾞﾟ、全角ＡＢＣと１２３",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ភាសាខ្មែរ ພາສາລາວ မြန်မာစာ བོད་ཡིག",
    "한국어는 띄어쓰기를 합니다 ㄱㄴ ㄷ",
    "Mixed: GNU 工具链 (toolchain) の使い方, version 2.0 版本",
    "々〇〆〻ゝゞヽヾ〱〲〳〴〵",
    "𠀀𠀁 𪜀 𫝀 𫠠 𬺰 𰀀 丽",
    "ΟΔΟΣ ΟΔΟΣ. İstanbul naïve café — e\u0301te",
    "snake_case 中_文 x² ½ ①",
    "",
    "  ,.;!? — “” …  ",
    "ー",
    "ｰ a ﾞ b ﾟ",
    # Scripts with combining marks, which Python's \\w (str.isalnum) leaves out of words.
    "हिन्दी भाषा में लिखा गया पाठ, संस्कृत",
    "বাংলা ভাষা ও সাহিত্য",
    "தமிழ் மொழி இலக்கியம்",
    "ਪੰਜਾਬੀ ગુજરાતી ଓଡ଼ିଆ తెలుగు ಕನ್ನಡ മലയാളം සිංහල",
    "اللُّغَةُ العَرَبِيَّةُ والفارسی، اردو",
    "עִבְרִית וְיִידִיש",
    "Ελληνικά, Русский язык, Қазақ тілі, Հայերեն, ქართული, አማርኛ",
    "Tiếng Việt có dấu: ệ ộ ữ, và e\u0323\u0302",
]


def pool():
    chars = set("aZq09_ .,'-\n\t")
    chars |= set("éÉİΣσςΑΣ\u0301\u0307’½²①ＡＺａ０９ㄱ가힣ㄅ、。「」・〆，！？")
    # Letters and their combining marks (Mn, Mc) of scripts written with spaces.
    for lo, hi in ((0x0915, 0x0918), (0x093C, 0x094D), (0x0995, 0x0997), (0x09BC, 0x09CD),
                   (0x0B95, 0x0B99), (0x0BBE, 0x0BCD), (0x0628, 0x062A), (0x064B, 0x0652),
                   (0x05D0, 0x05D2), (0x05B0, 0x05BC), (0x0300, 0x0304), (0x0483, 0x0489)):
        chars |= {chr(cp) for cp in range(lo, hi + 1)}
    for lo, hi in cjkwords.SPACELESS:
        for cp in (lo - 1, lo, lo + 1, (lo + hi) // 2, hi - 1, hi, hi + 1):
            if 0 < cp < 0x110000 and not 0xD800 <= cp < 0xE000:
                chars.add(chr(cp))
    # Characters Python 3.11 (Unicode 14) and neardup's tables may class apart are left out:
    # only code points assigned in Unicode 14 outside the table, or in the table.
    import unicodedata
    keep = [c for c in sorted(chars)
            if cjkwords.is_spaceless(c) or unicodedata.category(c) != "Cn"]
    return keep


def main():
    rnd = random.Random(20261127)
    chars = pool()
    texts = list(HAND)
    for _ in range(2000):
        n = rnd.randint(0, 32)
        texts.append("".join(rnd.choice(chars) for _ in range(n)))
    with open(os.path.join(HERE, "spaceless.json"), "w") as f:
        json.dump([list(r) for r in cjkwords.SPACELESS], f)
        f.write("\n")
    with open(os.path.join(HERE, "words.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t, "words": cjkwords.uwords(t)}, ensure_ascii=False) + "\n")
    print(f"{len(texts)} texts, {len(chars)} characters in the pool", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes fingerprints.txt, the bundled example for `neardup find-clusters`.

20,000 decimal u64 fingerprints, one per line, shuffled: 100 "documents" that each have
1 to 4 near copies (1 to 3 bits flipped from the original, as light edits do to a simhash),
5 of them also copied exactly, and random fingerprints for the rest. find-clusters at
distance 3 prints exactly the 100 planted clusters: each original with its copies (an exact
copy is the same value, printed once). Deterministic (splitmix64, seed 2024); plain Python.
"""
import os

MASK = (1 << 64) - 1
state = 2024


def rand():
    global state
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def below(n):
    return (rand() * n) >> 64


def main():
    lines = []
    for c in range(100):
        original = rand()
        lines.append(original)
        for _ in range(1 + below(4)):
            copy = original
            for bit in {below(64) for _ in range(1 + below(3))}:
                copy ^= 1 << bit
            lines.append(copy)
        if c < 5:
            lines.append(original)
    while len(lines) < 20_000:
        lines.append(rand())
    for i in range(len(lines) - 1, 0, -1):
        j = below(i + 1)
        lines[i], lines[j] = lines[j], lines[i]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fingerprints.txt")
    with open(out, "w") as f:
        f.writelines(f"{v}\n" for v in lines)


if __name__ == "__main__":
    main()

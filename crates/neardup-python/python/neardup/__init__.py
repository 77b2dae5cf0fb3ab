"""neardup: near-duplicate detection with 64-bit simhash fingerprints.

``neardup.simhash`` is a drop-in for seomoz simhash-py (``from neardup import simhash``).
"""

from neardup import simhash

__all__ = ["simhash"]

"""Faults through the Python API: a damaged store file is a StoreError naming it, never
pyo3's PanicException (which derives from BaseException and escapes ``except
Exception``), and a store in use says so."""

import os

import pytest

import neardup


def filled(path, n=500):
    with neardup.FingerprintStore.create(path, distance=3) as store:
        store.insert_bulk([(f"doc-{i}", i * 0x9E3779B97F4A7C15 % 2**64) for i in range(n)])


def test_a_store_cut_short_is_a_store_error_at_every_length(tmp_path):
    path = tmp_path / "s"
    filled(path)
    file = path / "neardup.redb"
    whole = file.read_bytes()
    for length in list(range(4096, len(whole), len(whole) // 23)) + [len(whole) - 1]:
        file.write_bytes(whole[:length])
        try:
            neardup.FingerprintStore.open(path)
        except Exception as e:  # a PanicException would not be caught here
            assert isinstance(e, neardup.StoreError), repr(e)
            assert "neardup.redb" in str(e) and "damaged" in str(e), str(e)
        else:
            pytest.fail(f"a store cut to {length} bytes opened")
    file.write_bytes(whole)
    with neardup.FingerprintStore.open(path) as store:
        assert len(store) == 500


def test_a_store_with_damaged_pages_is_an_error_or_opens(tmp_path):
    path = tmp_path / "s"
    filled(path, 2000)
    file = path / "neardup.redb"
    whole = file.read_bytes()
    pages = len(whole) // 4096
    for page in range(1, pages, max(1, pages // 30)):
        damaged = bytearray(whole)
        at = page * 4096 + 100
        if not any(damaged[at : at + 64]):
            continue
        damaged[at : at + 64] = bytes(b ^ 0x5A for b in damaged[at : at + 64])
        file.write_bytes(bytes(damaged))
        try:
            with neardup.FingerprintStore.open(path) as store:
                store.find_all(0)
        except Exception as e:
            assert isinstance(e, neardup.StoreError), repr(e)
            assert "neardup.redb" in str(e), str(e)


def test_a_store_in_use_says_so(tmp_path):
    path = tmp_path / "s"
    filled(path, 10)
    with neardup.FingerprintStore.open(path):
        with pytest.raises(neardup.StoreError, match="in use by this process"):
            neardup.FingerprintStore.open(path)
    with neardup.FingerprintStore.open(path) as store:
        assert len(store) == 10
    assert not os.path.exists(path / "neardup.pid")


def test_a_document_store_cut_short_or_damaged_is_a_store_error(tmp_path):
    """The document store (neardup serve's) as the fingerprint store above: a file cut
    short is a StoreError naming it at every length; damaged pages are an error or a store
    that answers, never a PanicException."""
    path = tmp_path / "docs"
    texts = [" ".join(f"w{(i * 7919 + j * 104729) % 1000003}" for j in range(60))
             for i in range(300)]
    with neardup.DocumentStore.create(path, paragraphs=True) as store:
        store.put_many([(f"doc-{i}", t) for i, t in enumerate(texts)])
    file = path / "neardup.redb"
    whole = file.read_bytes()
    for length in list(range(4096, len(whole), len(whole) // 23)) + [len(whole) - 1]:
        file.write_bytes(whole[:length])
        try:
            neardup.DocumentStore.open(path)
        except Exception as e:  # a PanicException would not be caught here
            assert isinstance(e, neardup.StoreError), repr(e)
            assert "neardup.redb" in str(e) and "damaged" in str(e), str(e)
        else:
            pytest.fail(f"a document store cut to {length} bytes opened")
    pages = len(whole) // 4096
    for page in range(1, pages, max(1, pages // 30)):
        damaged = bytearray(whole)
        at = page * 4096 + 100
        if not any(damaged[at : at + 64]):
            continue
        damaged[at : at + 64] = bytes(b ^ 0x5A for b in damaged[at : at + 64])
        file.write_bytes(bytes(damaged))
        try:
            with neardup.DocumentStore.open(path) as store:
                store.check(texts[7])
                store.put("new", texts[0] + " more")
                "doc-1" in store
        except Exception as e:
            assert isinstance(e, neardup.StoreError), repr(e)
            assert "neardup.redb" in str(e), str(e)
    file.write_bytes(whole)
    with neardup.DocumentStore.open(path) as store:
        assert len(store) == 300 and store.check(texts[7]) == [("doc-7", 1.0)]

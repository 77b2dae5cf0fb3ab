//! simhash-py's API on the core: `compute`, `unsigned_hash`, `num_differing_bits`,
//! `find_all` and the old `Corpus`. `shingle` is pure Python (`neardup/simhash.py`).

use std::convert::Infallible;
use std::sync::Arc;

use pyo3::prelude::*;

use neardup::batch::{Distinct, Matcher};
use neardup::fingerprint::compat;
use neardup::tables::Blocks;

use crate::convert::{
    bytes_arg, core_error, detach_if, fingerprint, fingerprints, layout, layout_args,
};
use crate::corpus::Shared;
use crate::layout::{tables_of, Table};

/// Inputs at least this long are worked on with the GIL released.
const DETACH_AT: usize = 1 << 14;

/// The simhash of `hashes` (ints in 0..2**64-1, or a numpy uint64 array): bit i is 1
/// when more than half of the hashes have it (a tie gives 0). Empty input gives 0.
#[pyfunction]
pub fn compute(py: Python<'_>, hashes: &Bound<'_, PyAny>) -> PyResult<u64> {
    let v = fingerprints(hashes)?;
    Ok(detach_if(py, v.len() >= DETACH_AT, || compat::compute(&v)))
}

/// The first 8 bytes of MD5(`obj`), read big-endian. `obj` is bytes (or another
/// bytes-like object); a `str` raises TypeError: encode it first.
#[pyfunction]
pub fn unsigned_hash(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(compat::unsigned_hash(&bytes_arg(obj, "unsigned_hash")?))
}

/// The number of bits in which `a` and `b` differ (the Hamming distance).
#[pyfunction]
pub fn num_differing_bits(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(compat::num_differing_bits(fingerprint(a)?, fingerprint(b)?))
}

/// Every unordered pair of distinct values of `hashes` within `different_bits` bits, once
/// each, as a list of `(a, b)` tuples with `a < b`, in no particular order. A value given
/// more than once is one value, so exact duplicates make no pair; with
/// `exact_duplicates=True` each repeated value `v` also gives `(v, v)`.
///
/// A bad layout (`number_of_blocks` not above `different_bits`, above 64, or needing too
/// many tables) raises ValueError where simhash-py aborted the interpreter.
#[pyfunction]
#[pyo3(signature = (hashes, number_of_blocks, different_bits, *, exact_duplicates = false))]
pub fn find_all(
    py: Python<'_>,
    hashes: &Bound<'_, PyAny>,
    number_of_blocks: &Bound<'_, PyAny>,
    different_bits: &Bound<'_, PyAny>,
    exact_duplicates: bool,
) -> PyResult<Vec<(u64, u64)>> {
    let layout = layout(number_of_blocks, different_bits)?;
    let fps = fingerprints(hashes)?;
    py.detach(move || {
        let (set, repeats) = if exact_duplicates {
            Distinct::from_vec_with_repeats(fps)?
        } else {
            (Distinct::from_vec(fps)?, Vec::new())
        };
        let mut out: Vec<(u64, u64)> = repeats.into_iter().map(|v| (v, v)).collect();
        let done = Matcher::new(layout).find_all(&set, |a, b| {
            out.push((a, b));
            Ok::<(), Infallible>(())
        });
        if let Err(never) = done {
            match never {}
        }
        Ok(out)
    })
    .map_err(core_error)
}

/// The old simhash-py Corpus: a set of fingerprints to query for near-duplicates within
/// `diff_bits` bits, using `num_blocks` blocks per fingerprint.
///
/// It is a set: inserting a fingerprint that is present does nothing, and removing one
/// removes it whatever number of times it was inserted (removing an absent one does
/// nothing), as the old Judy-array tables did.
///
/// Differences from simhash-py, on purpose:
///
/// - a bad layout (`num_blocks` not above `diff_bits`, above 64, or needing more than
///   10,000 tables) raises ValueError. Every table holds every fingerprint, about 16 bytes
///   each: simhash-py's own test layout `Corpus(20, 16)`, 4,845 tables, is built and costs
///   about 78 KB a fingerprint;
/// - `find_all` returns each match once (the old one repeated a match once per table that
///   found it), nearest first, then by value;
/// - `find_first` returns the nearest match (the smallest among equally near ones), and
///   None when nothing matches (the old one returned 0, which is also a fingerprint);
/// - `hashes()` lists the stored fingerprints, `len()` counts them and `in` tests one.
///
/// As in simhash-py, `tables` lists the tables (`neardup.Table`, each with `permute` and
/// `unpermute`, in the same order with the same permutations) and `differing_bits` is
/// the distance.
///
/// Inputs of the bulk methods are any iterable of ints or a numpy uint64 array. Bulk
/// methods run with the GIL released; the corpus may be shared between threads, and
/// queries never wait for writes.
#[pyclass(frozen, module = "neardup.simhash", name = "Corpus")]
pub struct Corpus {
    inner: Shared,
    /// The seomoz tables, for `tables`.
    layout: Arc<neardup::tables::Layout>,
}

#[pymethods]
impl Corpus {
    #[new]
    #[pyo3(signature = (num_blocks, diff_bits))]
    fn new(num_blocks: &Bound<'_, PyAny>, diff_bits: &Bound<'_, PyAny>) -> PyResult<Corpus> {
        let (blocks, distance) = layout_args(num_blocks, diff_bits)?;
        let index =
            neardup::corpus::Corpus::new(Blocks::Fixed(blocks), distance, 0).map_err(core_error)?;
        let layout = neardup::tables::Layout::new(blocks, distance).map_err(core_error)?;
        Ok(Corpus {
            inner: Shared::new(index),
            layout: Arc::new(layout),
        })
    }

    /// The tables, one per choice of leading blocks, in simhash-py's order: each a
    /// `neardup.Table` with `permute` and `unpermute` (a new list each time; the tables
    /// themselves do not change).
    #[getter]
    fn tables(&self) -> Vec<Table> {
        tables_of(&self.layout)
    }

    /// The largest distance matched (`diff_bits`), as simhash-py named it.
    #[getter]
    fn differing_bits(&self) -> u32 {
        self.layout.distance()
    }

    /// Adds `hash`; nothing happens when it is already present.
    fn insert(&self, py: Python<'_>, hash: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = fingerprint(hash)?;
        // Each fingerprint is its own id: a present one is left as it is.
        self.inner.write(py, |index| {
            if index.get(h).is_none() {
                index.insert(h, h)?;
            }
            Ok(())
        })
    }

    /// Adds every fingerprint of `hashes` (an iterable of ints or a numpy uint64 array);
    /// those already present are left as they are. All or nothing: on an error none is
    /// added.
    fn insert_bulk(&self, py: Python<'_>, hashes: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = fingerprints(hashes)?;
        self.inner.write(py, move |index| {
            let mut fresh: Vec<(u64, u64)> = v
                .into_iter()
                .filter(|&h| index.get(h).is_none())
                .map(|h| (h, h))
                .collect();
            fresh.sort_unstable();
            fresh.dedup();
            index.insert_bulk(&fresh)
        })
    }

    /// Removes `hash`; nothing happens when it is absent.
    fn remove(&self, py: Python<'_>, hash: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = fingerprint(hash)?;
        self.inner.write(py, |index| {
            index.remove(h);
            Ok(())
        })
    }

    /// Removes every fingerprint of `hashes`; absent ones are skipped.
    fn remove_bulk(&self, py: Python<'_>, hashes: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = fingerprints(hashes)?;
        self.inner.write(py, move |index| {
            index.remove_bulk(&v);
            Ok(())
        })
    }

    /// The stored fingerprint nearest to `hash` within the distance (the smallest of
    /// equally near ones; `hash` itself when stored), or None.
    fn find_first(&self, hash: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let h = fingerprint(hash)?;
        Ok(self.inner.reader.find_first(h).map(|(fp, _)| fp))
    }

    /// `find_first` of each query, in order.
    fn find_first_bulk(
        &self,
        py: Python<'_>,
        hashes: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<u64>>> {
        let v = fingerprints(hashes)?;
        Ok(py.detach(|| {
            self.inner
                .reader
                .find_first_bulk(&v)
                .into_iter()
                .map(|m| m.map(|(fp, _)| fp))
                .collect()
        }))
    }

    /// Every stored fingerprint within the distance of `hash`, each once, nearest first
    /// (then by value); `hash` itself comes first when stored.
    fn find_all(&self, hash: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        let h = fingerprint(hash)?;
        Ok(self
            .inner
            .reader
            .find_all(h)
            .into_iter()
            .map(|(fp, _)| fp)
            .collect())
    }

    /// `find_all` of each query, in order.
    fn find_all_bulk(&self, py: Python<'_>, hashes: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u64>>> {
        let v = fingerprints(hashes)?;
        Ok(py.detach(|| {
            self.inner
                .reader
                .find_all_bulk(&v)
                .into_iter()
                .map(|ms| ms.into_iter().map(|(fp, _)| fp).collect())
                .collect()
        }))
    }

    /// The stored fingerprints, in increasing order.
    fn hashes(&self, py: Python<'_>) -> Vec<u64> {
        // Ids are the fingerprints, and documents come by id: already in order.
        py.detach(|| {
            self.inner
                .reader
                .documents()
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        })
    }

    fn __len__(&self) -> usize {
        self.inner.reader.len()
    }

    fn __contains__(&self, hash: &Bound<'_, PyAny>) -> bool {
        match hash.extract::<u64>() {
            Ok(h) => self.inner.reader.find_first(h).is_some_and(|(_, d)| d == 0),
            Err(_) => false,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Corpus(num_blocks={}, diff_bits={}) with {} fingerprints",
            self.layout.blocks(),
            self.layout.distance(),
            self.inner.reader.len()
        )
    }
}

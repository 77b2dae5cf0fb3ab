//! neardup's own in-memory `Corpus`: documents with int ids and their fingerprints.

use std::sync::Mutex;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use neardup::corpus::CorpusReader;
use neardup::tables::Blocks;

use crate::convert::{
    blocks_arg, core_error, detach_if, distance_arg, fingerprint, fingerprints, id, size_arg,
    type_name,
};

/// Queries at least this many run with the GIL released.
const DETACH_AT: usize = 1 << 10;

/// An in-memory corpus of documents, each an int id (0..2**64-1) with a fingerprint, to
/// query for near-duplicates within `distance` bits (default 3).
///
/// `blocks` is `"auto"` (the planner's choice for about `expected` documents) or a number
/// of blocks above `distance`; a bad layout raises ValueError. Inserting an id that is
/// stored replaces its fingerprint. Matches are `(id, distance)` pairs, each document
/// once, nearest first, then by id. Bulk methods run with the GIL released; queries may
/// run from other threads while one writes, and never wait for it.
///
/// >>> import neardup
/// >>> c = neardup.Corpus(distance=3)
/// >>> c.insert(1, 0b1111)
/// >>> c.insert_bulk([(2, 0b0111), (3, 1 << 40)])
/// >>> c.find_all(0b1111)
/// [(1, 0), (2, 1)]
/// >>> c.find_first(0xFFFF << 40)
/// >>> len(c), c.get(3) == 1 << 40
/// (3, True)
#[pyclass(frozen, module = "neardup", name = "Corpus")]
pub struct Corpus {
    inner: Shared,
    blocks: usize,
    distance: u32,
}

/// A core corpus shared between Python threads: writes take the lock (with the GIL
/// released), queries go through a reader and never wait for them. Both Python `Corpus`
/// classes hold one.
pub struct Shared {
    writer: Mutex<neardup::corpus::Corpus>,
    /// Queries, on the latest state.
    pub reader: CorpusReader,
}

impl Shared {
    /// Shares `corpus`.
    pub fn new(corpus: neardup::corpus::Corpus) -> Shared {
        Shared {
            reader: corpus.reader(),
            writer: Mutex::new(corpus),
        }
    }

    /// Runs `f` on the writer with the GIL released, so a thread waiting for the lock
    /// never holds the GIL.
    pub fn write<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut neardup::corpus::Corpus) -> neardup::Result<R> + Send,
    ) -> PyResult<R> {
        enum Failure {
            Poisoned,
            Core(neardup::Error),
        }
        let result = py.detach(|| {
            let mut c = self.writer.lock().map_err(|_| Failure::Poisoned)?;
            f(&mut c).map_err(Failure::Core)
        });
        result.map_err(|e| match e {
            Failure::Poisoned => PyRuntimeError::new_err(
                "this Corpus is unusable: an earlier call failed in the middle of a change",
            ),
            Failure::Core(e) => core_error(e),
        })
    }
}

/// `(id, fingerprint)` pairs: from an iterable of pairs, or from `ids` and `fingerprints`
/// given apart (each any iterable of ints or a numpy uint64 array).
pub fn id_fp_pairs(
    docs: &Bound<'_, PyAny>,
    fps: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(u64, u64)>> {
    if let Some(fps) = fps {
        let ids = fingerprints(docs)?;
        let fps = fingerprints(fps)?;
        if ids.len() != fps.len() {
            return Err(PyValueError::new_err(format!(
                "{} ids for {} fingerprints: give one id per fingerprint",
                ids.len(),
                fps.len()
            )));
        }
        return Ok(ids.into_iter().zip(fps).collect());
    }
    let iter = docs.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected an iterable of (id, fingerprint) pairs, got {}",
            type_name(docs)
        ))
    })?;
    let mut out = Vec::with_capacity(docs.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        let item = item?;
        let pair = item.cast::<PyTuple>().ok().filter(|t| t.len() == 2);
        let Some(pair) = pair else {
            return Err(PyTypeError::new_err(format!(
                "item {i} must be an (id, fingerprint) tuple, got {}",
                type_name(&item)
            )));
        };
        out.push((id(&pair.get_item(0)?)?, fingerprint(&pair.get_item(1)?)?));
    }
    Ok(out)
}

#[pymethods]
impl Corpus {
    #[new]
    #[pyo3(signature = (distance = None, blocks = None, expected = None))]
    fn new(
        distance: Option<&Bound<'_, PyAny>>,
        blocks: Option<&Bound<'_, PyAny>>,
        expected: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Corpus> {
        let distance = distance.map_or(Ok(3), |d| distance_arg(d, 64))?;
        let blocks = blocks.map_or(Ok(Blocks::Auto), blocks_arg)?;
        let expected = expected.map_or(Ok(0), |e| size_arg(e, "expected"))?;
        let c = neardup::corpus::Corpus::new(blocks, distance, expected).map_err(core_error)?;
        Ok(Corpus {
            blocks: c.layout().blocks(),
            distance,
            inner: Shared::new(c),
        })
    }

    /// Stores `id` with fingerprint `fp`; returns the fingerprint it replaced, or None.
    fn insert(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        fp: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        let (id, fp) = (self::id(id)?, fingerprint(fp)?);
        self.inner.write(py, |c| c.insert(id, fp))
    }

    /// Stores many documents: `insert_bulk([(id, fp), ...])`, or `insert_bulk(ids, fps)`
    /// with two iterables or numpy uint64 arrays of the same length. A later copy of an id
    /// wins. All or nothing: on an error none is stored.
    #[pyo3(signature = (docs, fingerprints = None))]
    fn insert_bulk(
        &self,
        py: Python<'_>,
        docs: &Bound<'_, PyAny>,
        fingerprints: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let docs = id_fp_pairs(docs, fingerprints)?;
        self.inner.write(py, move |c| c.insert_bulk(&docs))
    }

    /// Removes `id`; returns its fingerprint, or None when it was not stored.
    fn remove(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let id = self::id(id)?;
        self.inner.write(py, |c| Ok(c.remove(id)))
    }

    /// Removes every id of `ids` (an iterable of ints or a numpy uint64 array); returns how
    /// many were stored.
    fn remove_bulk(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ids = fingerprints(ids)?;
        self.inner.write(py, move |c| Ok(c.remove_bulk(&ids)))
    }

    /// The fingerprint stored for `id`, or None.
    fn get(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let id = self::id(id)?;
        self.inner.write(py, |c| Ok(c.get(id)))
    }

    /// The nearest document within the distance of `fp` as `(id, distance)` (the smallest
    /// id among equally near ones), or None.
    fn find_first(&self, fp: &Bound<'_, PyAny>) -> PyResult<Option<(u64, u32)>> {
        Ok(self.inner.reader.find_first(fingerprint(fp)?))
    }

    /// Every document within the distance of `fp`, as `(id, distance)`, nearest first,
    /// then by id.
    fn find_all(&self, fp: &Bound<'_, PyAny>) -> PyResult<Vec<(u64, u32)>> {
        Ok(self.inner.reader.find_all(fingerprint(fp)?))
    }

    /// `find_first` of each query (an iterable of ints or a numpy uint64 array), in order.
    fn find_first_bulk(
        &self,
        py: Python<'_>,
        fps: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<(u64, u32)>>> {
        let v = fingerprints(fps)?;
        Ok(detach_if(py, v.len() >= DETACH_AT, || {
            self.inner.reader.find_first_bulk(&v)
        }))
    }

    /// `find_all` of each query, in order.
    fn find_all_bulk(
        &self,
        py: Python<'_>,
        fps: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Vec<(u64, u32)>>> {
        let v = fingerprints(fps)?;
        Ok(detach_if(py, v.len() >= DETACH_AT, || {
            self.inner.reader.find_all_bulk(&v)
        }))
    }

    /// Every stored `(id, fingerprint)`, by id.
    fn documents(&self, py: Python<'_>) -> Vec<(u64, u64)> {
        py.detach(|| self.inner.reader.documents())
    }

    /// Bytes of memory the corpus holds for its tables, ids and recent changes (not
    /// counting the allocator's own overhead), to size a process by.
    ///
    /// >>> import neardup
    /// >>> c = neardup.Corpus(distance=3)
    /// >>> c.insert_bulk([(i, i * 0x9E3779B97F4A7C15 % 2**64) for i in range(1000)])
    /// >>> c.heap_bytes() >= 1000 * 16
    /// True
    fn heap_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        self.inner.write(py, |c| Ok(c.heap_bytes()))
    }

    /// Blocks per fingerprint (the planner's choice for `blocks="auto"`).
    #[getter]
    fn blocks(&self) -> usize {
        self.blocks
    }

    /// The largest distance matched.
    #[getter]
    fn distance(&self) -> u32 {
        self.distance
    }

    fn __len__(&self) -> usize {
        self.inner.reader.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Corpus(distance={}, blocks={}) with {} documents",
            self.distance,
            self.blocks,
            self.inner.reader.len()
        )
    }
}

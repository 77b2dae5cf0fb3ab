//! `Idf`: the inverse document frequencies of `weighting="tfidf"`, counted on texts as
//! `neardup idf` counts them, or read from a table it wrote.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use neardup::fingerprint::{self as core, IdfBuilder};

use crate::convert::{bytes_arg, count_arg, detach_if, io_error, u64_arg};
use crate::own::{default_fingerprinter, text_batches, Fingerprinter, DETACH_TEXTS};

/// Texts counted at a time (the CLI's batch): an iterator of texts is never all in memory.
const BATCH: usize = 4096;

/// `neardup idf --min-df` left out.
const DEFAULT_MIN_DF: u32 = 2;

/// A table from its bytes; `ValueError` (naming the file it came from, if any) when they
/// are not one.
pub(crate) fn parse(bytes: &[u8], path: Option<&Path>) -> PyResult<core::Idf> {
    core::Idf::from_bytes(bytes).map_err(|e| match path {
        Some(path) => PyValueError::new_err(format!("'{}': {e}", path.display())),
        None => PyValueError::new_err(e.to_string()),
    })
}

/// The table in the file at `path`; an `OSError` when it cannot be read.
pub(crate) fn read(py: Python<'_>, path: &Path) -> PyResult<core::Idf> {
    let bytes = py.detach(|| std::fs::read(path)).map_err(|e| {
        io_error(
            py,
            e,
            &format!("cannot read idf table '{}'", path.display()),
        )
    })?;
    py.detach(|| parse(&bytes, Some(path)))
}

/// Inverse document frequencies of features, counted on a corpus: the table of
/// `Fingerprinter(weighting="tfidf", idf=...)`, by which rare features weigh more. A
/// feature found in `df` of the `docs` documents counted weighs `ln((1 + docs) / (1 + df))
/// + 1`; one the table lacks (never seen, or seen in fewer than `min_df` documents)
/// weighs the most, `ln(1 + docs) + 1`.
///
/// `Idf.build(texts)` counts the distinct features (`Fingerprinter.feature_set`) of each
/// text as `neardup idf` does: with the same fingerprinter settings and `min_df`, the
/// table is the same, byte for byte. Count with the tokenizer, window and normalisation of
/// the `Fingerprinter` that will use the table (the weighting plays no part). `to_bytes()`
/// and `save(path)` write the format of `neardup idf -o`, which `Idf.from_bytes` and
/// `Idf.load` read, as does `Fingerprinter(idf=...)`. Tables are immutable and may be
/// shared between threads; a bad table raises ValueError, a file that cannot be read or
/// written OSError.
///
/// >>> import neardup
/// >>> texts = ["the cat sat on the mat", "the dog sat on the log", "a bird in the hand"]
/// >>> words = neardup.Fingerprinter(window=1)
/// >>> idf = neardup.Idf.build(texts, fingerprinter=words)   # min_df=2, as neardup idf
/// >>> idf.docs, len(idf)                                    # "the", "sat" and "on"
/// (3, 3)
/// >>> [the] = words.feature_set("the")
/// >>> [cat] = words.feature_set("cat")
/// >>> idf.idf(the), idf.idf(cat) == idf.idf(12345)          # in every text; in too few
/// (1.0, True)
/// >>> tfidf = neardup.Fingerprinter(window=1, idf=idf)
/// >>> tfidf.fingerprint("the cat") != words.fingerprint("the cat")
/// True
/// >>> neardup.Idf.from_bytes(idf.to_bytes()).to_bytes() == idf.to_bytes()
/// True
#[pyclass(frozen, module = "neardup", name = "Idf")]
pub struct Idf {
    table: Arc<core::Idf>,
}

impl Idf {
    fn new(table: core::Idf) -> Idf {
        Idf {
            table: Arc::new(table),
        }
    }

    /// The table, shared.
    pub(crate) fn table(&self) -> Arc<core::Idf> {
        Arc::clone(&self.table)
    }

    /// A Python `Idf` over a table already shared.
    pub(crate) fn shared(table: Arc<core::Idf>) -> Idf {
        Idf { table }
    }
}

#[pymethods]
impl Idf {
    /// Counts `texts` (an iterable of str, read a batch at a time) with `fingerprinter`
    /// (default `Fingerprinter()`), keeping the features of at least `min_df` of them
    /// (default 2, as `neardup idf`; 0 and 1 keep all). Counts in parallel with the GIL
    /// released.
    #[staticmethod]
    #[pyo3(signature = (texts, *, min_df = None, fingerprinter = None))]
    fn build(
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        min_df: Option<&Bound<'_, PyAny>>,
        fingerprinter: Option<&Bound<'_, Fingerprinter>>,
    ) -> PyResult<Idf> {
        let min_df = min_df.map_or(Ok(DEFAULT_MIN_DF), |m| count_arg(m, "min_df", u32::MAX))?;
        let fp = match fingerprinter {
            Some(f) => &f.get().inner,
            None => default_fingerprinter(),
        };
        let mut counts = IdfBuilder::new();
        text_batches(texts, BATCH, |batch| {
            detach_if(py, batch.len() >= DETACH_TEXTS, || {
                counts.add_texts(fp, &batch)
            });
            Ok(())
        })?;
        Ok(Idf::new(py.detach(move || counts.build(min_df))))
    }

    /// The table `to_bytes()` (or `neardup idf`) wrote; `data` is bytes, a bytearray or a
    /// memoryview.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Idf> {
        if data.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "Idf.from_bytes() expects bytes, not str (Idf.load(path) reads a file)",
            ));
        }
        let bytes = bytes_arg(data, "Idf.from_bytes")?;
        Ok(Idf::new(py.detach(|| parse(&bytes, None))?))
    }

    /// The table in the file at `path` (a str or path), written by `save` or `neardup idf`.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Idf> {
        Ok(Idf::new(read(py, &path)?))
    }

    /// Pickles as its bytes, so a table travels to worker processes (multiprocessing,
    /// Spark, Dask, Ray) and back unchanged.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = slf.get_type().getattr("from_bytes")?;
        Ok((from_bytes, (slf.get().to_bytes(slf.py()),)))
    }

    /// The table as bytes, in the format of `neardup idf`.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes = py.detach(|| self.table.to_bytes());
        PyBytes::new(py, &bytes)
    }

    /// Writes `to_bytes()` to the file at `path` (a str or path), replacing it.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| std::fs::write(&path, self.table.to_bytes()))
            .map_err(|e| {
                io_error(
                    py,
                    e,
                    &format!("cannot write idf table '{}'", path.display()),
                )
            })
    }

    /// The idf of `feature` (an int from `Fingerprinter.feature_set`).
    fn idf(&self, feature: &Bound<'_, PyAny>) -> PyResult<f32> {
        Ok(self.table.idf(u64_arg(feature, "feature")?))
    }

    /// Documents counted.
    #[getter]
    fn docs(&self) -> u64 {
        self.table.docs()
    }

    /// Features in the table.
    fn __len__(&self) -> usize {
        self.table.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Idf(docs={}, features={})",
            self.table.docs(),
            self.table.len()
        )
    }
}

//! `Fingerprinter` and its idf table `Idf` (each takes the other: `Fingerprinter(idf=...)`,
//! `Idf.build(texts, fingerprinter)`), and `fingerprint`, `fingerprint_many` with the
//! defaults.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use neardup::fingerprint::{self as core, Config, IdfBuilder, Normalize, Weighting};

use crate::convert::{bytes_arg, core_error, count_arg, detach_if, io_error, type_name, u64_arg};
use crate::text::Text;

/// Texts at least this many are fingerprinted with the GIL released; fewer are not worth
/// the switch.
pub(crate) const DETACH_TEXTS: usize = 8;

/// Every item of an iterable of `str`.
fn texts(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Text>> {
    let mut all = Vec::new();
    text_batches(obj, usize::MAX, |batch| {
        all = batch;
        Ok(())
    })?;
    Ok(all)
}

/// The items of `obj`, an iterable of `str` (not a `str` itself), handed to `batch` in
/// order, `size` at a time, so that a long iterator is never all in memory.
pub(crate) fn text_batches(
    obj: &Bound<'_, PyAny>,
    size: usize,
    mut batch: impl FnMut(Vec<Text>) -> PyResult<()>,
) -> PyResult<()> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "texts must be an iterable of str, not a str (wrap it in a list)",
        ));
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "texts must be an iterable of str, got {}",
            type_name(obj)
        ))
    })?;
    let mut pending = Vec::with_capacity(obj.len().unwrap_or(0).min(size));
    for (i, item) in iter.enumerate() {
        // The label is formatted only on error: no allocation per text of a long list.
        pending.push(Text::extract(&item?, format_args!("texts[{i}]"))?);
        if pending.len() == size {
            batch(std::mem::take(&mut pending))?;
        }
    }
    if pending.is_empty() {
        Ok(())
    } else {
        batch(pending)
    }
}

/// Byte offsets of `text` as character offsets (what Python slices by).
fn char_offsets(text: &str, bytes: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut chars = 0;
    let mut at = 0;
    for &b in bytes {
        // Offsets come in increasing order, so one walk over the text serves them all.
        chars += text.get(at..b).map_or(0, |s| s.chars().count());
        at = b.max(at);
        out.push(chars);
    }
    out
}

/// Turns texts into 64-bit simhash fingerprints with neardup's pipeline: normalise (NFKC,
/// lowercase, fold white space, ASCII quotes) → tokens → shingles of `window` tokens →
/// xxh3 feature hashes → weighted bit votes. The defaults are those of `neardup
/// fingerprint`; every option is keyword-only:
///
/// - `tokenizer`: `"words"` (Unicode words, default), `"ascii"` (runs of ASCII letters),
///   `"char:N"` (character N-grams) or `"jieba"` (Chinese/Japanese words);
/// - `window`: tokens per shingle, 1 to 16 (default 2);
/// - `weighting`: `"tf"` (default, 1 + ln(count) per distinct feature), `"none"` (every
///   occurrence votes once), `"custom"` (with `weights`, a dict of token → weight ≥ 0),
///   `"tfidf"` (with `idf`, a table counted with the same tokenizer, window and
///   normalisation: an `Idf`, or the bytes or the path of one saved by `Idf.save` or
///   `neardup idf`) or `"lenpos"` (with `lambda_`, default 0.5); left out, it is
///   `"custom"` when `weights` is given, `"tfidf"` when `idf` is, else `"tf"`;
/// - `nfkc`, `lowercase`, `fold_whitespace`, `ascii_quotes`: the normalisation steps, all
///   on by default;
/// - `min_paragraph`: paragraphs shorter than this many bytes merge into the next
///   (`paragraphs`, default 200).
///
/// A bad option raises ValueError (TypeError for a wrong type). Fingerprinters are
/// immutable and may be shared between threads.
///
/// >>> import neardup
/// >>> fp = neardup.Fingerprinter()
/// >>> fp.fingerprint("The quick brown fox") == neardup.fingerprint("the  QUICK brown fox")
/// True
/// >>> neardup.Fingerprinter(lowercase=False).fingerprint("The quick brown fox") == \
/// ...     neardup.Fingerprinter(lowercase=False).fingerprint("the quick brown fox")
/// False
/// >>> fp.fingerprint_many(["a b", "c d"]) == [fp.fingerprint("a b"), fp.fingerprint("c d")]
/// True
#[pyclass(frozen, module = "neardup", name = "Fingerprinter")]
pub struct Fingerprinter {
    pub(crate) inner: core::Fingerprinter,
    /// The weighting as named by the caller, for `repr`.
    weighting: String,
    tokenizer: String,
}

/// The idf table of `Fingerprinter(idf=...)`: an `Idf`, its bytes, or the path of its file.
fn idf_table(obj: &Bound<'_, PyAny>) -> PyResult<Arc<core::Idf>> {
    if let Ok(table) = obj.cast::<Idf>() {
        return Ok(table.get().table());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return parse(b.as_bytes(), None).map(Arc::new);
    }
    let path: std::path::PathBuf = obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "idf must be an Idf, bytes or a path, got {}",
            type_name(obj)
        ))
    })?;
    read(obj.py(), &path).map(Arc::new)
}

/// Token weights from a dict of str → float.
fn weight_map(obj: &Bound<'_, PyAny>) -> PyResult<HashMap<String, f32>> {
    let dict = obj.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "weights must be a dict of str to float, got {}",
            type_name(obj)
        ))
    })?;
    let mut out = HashMap::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        let token: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!("weights keys must be str, got {}", type_name(&k)))
        })?;
        let weight: f64 = v.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "the weight of {token:?} must be a number, got {}",
                type_name(&v)
            ))
        })?;
        out.insert(token, weight as f32);
    }
    Ok(out)
}

#[pymethods]
impl Fingerprinter {
    #[new]
    #[pyo3(signature = (
        *,
        tokenizer = "words",
        window = 2,
        weighting = None,
        weights = None,
        idf = None,
        lambda_ = 0.5,
        nfkc = true,
        lowercase = true,
        fold_whitespace = true,
        ascii_quotes = true,
        min_paragraph = 200,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tokenizer: &str,
        window: usize,
        weighting: Option<&str>,
        weights: Option<&Bound<'_, PyAny>>,
        idf: Option<&Bound<'_, PyAny>>,
        lambda_: f32,
        nfkc: bool,
        lowercase: bool,
        fold_whitespace: bool,
        ascii_quotes: bool,
        min_paragraph: usize,
    ) -> PyResult<Fingerprinter> {
        let name = match (weighting, weights.is_some(), idf.is_some()) {
            (_, true, true) => {
                return Err(PyValueError::new_err(
                    "give weights (weighting='custom') or idf (weighting='tfidf'), not both",
                ))
            }
            (Some(w), _, _) => w,
            (None, true, _) => "custom",
            (None, _, true) => "tfidf",
            (None, false, false) => "tf",
        };
        let weighting = match name {
            "none" | "tf" | "lenpos" if weights.is_some() || idf.is_some() => {
                return Err(PyValueError::new_err(format!(
                    "weights and idf are for weighting 'custom' and 'tfidf', not {name:?}"
                )))
            }
            "none" => Weighting::None,
            "tf" => Weighting::Tf,
            "lenpos" => Weighting::LenPos { lambda: lambda_ },
            "custom" => match weights {
                Some(w) => Weighting::Custom(Arc::new(weight_map(w)?)),
                None => return Err(PyValueError::new_err("weighting 'custom' needs weights")),
            },
            "tfidf" => match idf {
                Some(t) => Weighting::TfIdf(idf_table(t)?),
                None => return Err(PyValueError::new_err("weighting 'tfidf' needs idf")),
            },
            _ => {
                return Err(PyValueError::new_err(format!(
                    "weighting must be 'tf', 'none', 'custom', 'tfidf' or 'lenpos', got {name:?}"
                )))
            }
        };
        let config = Config {
            normalize: Normalize {
                nfkc,
                lowercase,
                fold_whitespace,
                ascii_quotes,
            },
            tokenizer: tokenizer.parse().map_err(core_error)?,
            window,
            weighting,
            min_paragraph,
        };
        Ok(Fingerprinter {
            inner: core::Fingerprinter::new(config).map_err(core_error)?,
            weighting: name.to_string(),
            tokenizer: tokenizer.to_string(),
        })
    }

    /// The fingerprint of `text` (a str); 0 when it has no tokens.
    fn fingerprint(&self, text: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.inner.fingerprint(&Text::extract(text, "text")?))
    }

    /// The fingerprints of `texts` (an iterable of str), in order: the same as
    /// `[fp.fingerprint(t) for t in texts]`, computed in parallel with the GIL released.
    fn fingerprint_many(&self, py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        many(py, &self.inner, texts)
    }

    /// The 256-bit fingerprint of `text` as 4 ints (64-bit lanes; lane 0 is
    /// `fingerprint(text)`), what `dedup` compares: distances between wide fingerprints
    /// are the sums of the lanes' distances.
    fn fingerprint_wide(&self, text: &Bound<'_, PyAny>) -> PyResult<(u64, u64, u64, u64)> {
        let [a, b, c, d] = self.inner.fingerprint_wide(&Text::extract(text, "text")?);
        Ok((a, b, c, d))
    }

    /// The distinct feature hashes of `text` (a str), increasing: what an `Idf` table
    /// counts, and what `Idf.idf` looks up. Features are shingles of `window` tokens, so
    /// they depend on the tokenizer, window and normalisation, not on the weighting.
    ///
    /// >>> import neardup
    /// >>> fp = neardup.Fingerprinter(window=1)
    /// >>> len(fp.feature_set("to be or not to be")), fp.feature_set("") == []
    /// (4, True)
    /// >>> fp.feature_set("B a b") == fp.feature_set("a b")
    /// True
    fn feature_set(&self, text: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        Ok(self.inner.feature_set(&Text::extract(text, "text")?))
    }

    /// The paragraphs of `text` as `(start, end, fingerprint)`, `text[start:end]` being the
    /// paragraph. Paragraphs are separated by blank lines and HTML block tags; one shorter
    /// than `min_paragraph` bytes merges into the next (the last into the one before).
    fn paragraphs(&self, text: &Bound<'_, PyAny>) -> PyResult<Vec<(usize, usize, u64)>> {
        let text = Text::extract(text, "text")?;
        let paras = self.inner.paragraphs(&text);
        let bytes: Vec<usize> = paras.iter().flat_map(|p| [p.start, p.end]).collect();
        let chars = char_offsets(&text, &bytes);
        Ok(paras
            .iter()
            .zip(chars.chunks_exact(2))
            .map(|(p, c)| (c[0], c[1], p.fingerprint))
            .collect())
    }

    /// Tokens per shingle.
    #[getter]
    fn window(&self) -> usize {
        self.inner.config().window
    }

    /// Pickles as the keyword arguments that make it again (weights and idf tables
    /// included), so it travels to worker processes (multiprocessing, Spark, Dask, Ray).
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let me = slf.get();
        let c = me.inner.config();
        let n = c.normalize;
        let kw = PyDict::new(py);
        kw.set_item("tokenizer", &me.tokenizer)?;
        kw.set_item("window", c.window)?;
        kw.set_item("weighting", &me.weighting)?;
        match &c.weighting {
            Weighting::Custom(map) => kw.set_item("weights", map.as_ref())?,
            Weighting::TfIdf(table) => {
                kw.set_item("idf", Bound::new(py, Idf::shared(Arc::clone(table)))?)?
            }
            Weighting::LenPos { lambda } => kw.set_item("lambda_", lambda)?,
            _ => {}
        }
        kw.set_item("nfkc", n.nfkc)?;
        kw.set_item("lowercase", n.lowercase)?;
        kw.set_item("fold_whitespace", n.fold_whitespace)?;
        kw.set_item("ascii_quotes", n.ascii_quotes)?;
        kw.set_item("min_paragraph", c.min_paragraph)?;
        let make = py
            .import("functools")?
            .getattr("partial")?
            .call((slf.get_type(),), Some(&kw))?;
        Ok((make, PyTuple::empty(py)))
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        let n = c.normalize;
        let py_bool = |b: bool| if b { "True" } else { "False" };
        format!(
            "Fingerprinter(tokenizer='{}', window={}, weighting='{}', nfkc={}, lowercase={}, \
             fold_whitespace={}, ascii_quotes={}, min_paragraph={})",
            self.tokenizer,
            c.window,
            self.weighting,
            py_bool(n.nfkc),
            py_bool(n.lowercase),
            py_bool(n.fold_whitespace),
            py_bool(n.ascii_quotes),
            c.min_paragraph
        )
    }
}

/// `fingerprint_many` with `fp`.
fn many(py: Python<'_>, fp: &core::Fingerprinter, texts: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let texts = self::texts(texts)?;
    Ok(if texts.len() >= DETACH_TEXTS {
        py.detach(|| fp.fingerprint_many(&texts))
    } else {
        texts.iter().map(|t| fp.fingerprint(t)).collect()
    })
}

/// The default fingerprinter, built once.
pub(crate) fn default_fingerprinter() -> &'static core::Fingerprinter {
    static DEFAULT: OnceLock<core::Fingerprinter> = OnceLock::new();
    DEFAULT.get_or_init(core::Fingerprinter::default)
}

/// The fingerprint of `text` with the default settings (`Fingerprinter()`, the same as
/// `neardup fingerprint`).
///
/// >>> import neardup
/// >>> neardup.fingerprint("hello world") == neardup.Fingerprinter().fingerprint("Hello World")
/// True
#[pyfunction]
pub fn fingerprint(text: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(default_fingerprinter().fingerprint(&Text::extract(text, "text")?))
}

/// The fingerprints of `texts` with the default settings, in order; in parallel with the
/// GIL released.
///
/// >>> import neardup
/// >>> neardup.fingerprint_many(["a b", "c d"]) == [neardup.fingerprint("a b"), neardup.fingerprint("c d")]
/// True
#[pyfunction]
pub fn fingerprint_many(py: Python<'_>, texts: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    many(py, default_fingerprinter(), texts)
}

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

//! neardup's own API: `Fingerprinter`, `fingerprint`, `fingerprint_many`, `find_all` and
//! `clusters` over fingerprints with optional ids, and `dedup` over `(id, text)` records.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rayon::prelude::*;

use neardup::batch::{self, Indexed, Matcher, WideMatcher};
use neardup::fingerprint::{
    self as core, Config, Idf, Normalize, Weighting, DEFAULT_DISTANCE, LANES,
};

use neardup::decide::Signature;
use neardup::jaccard::{BandKeys, Sketch, Threshold};

use crate::convert::{blocks_arg, core_error, distance_arg, fingerprints, type_name};
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
fn idf_table(obj: &Bound<'_, PyAny>) -> PyResult<Arc<Idf>> {
    if let Ok(table) = obj.cast::<crate::idf::Idf>() {
        return Ok(table.get().table());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return crate::idf::parse(b.as_bytes(), None).map(Arc::new);
    }
    let path: std::path::PathBuf = obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "idf must be an Idf, bytes or a path, got {}",
            type_name(obj)
        ))
    })?;
    crate::idf::read(obj.py(), &path).map(Arc::new)
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
            Weighting::TfIdf(table) => kw.set_item(
                "idf",
                Bound::new(py, crate::idf::Idf::shared(Arc::clone(table)))?,
            )?,
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

/// `ids` as a list the length of what it names, or `None` for positions.
fn id_list(ids: Option<&Bound<'_, PyAny>>, n: usize) -> PyResult<Option<Vec<Py<PyAny>>>> {
    let Some(ids) = ids else { return Ok(None) };
    if ids.is_none() {
        return Ok(None);
    }
    let iter = ids.try_iter().map_err(|_| {
        PyTypeError::new_err(format!("ids must be an iterable, got {}", type_name(ids)))
    })?;
    let out: Vec<Py<PyAny>> = iter
        .map(|i| i.map(Bound::unbind))
        .collect::<PyResult<_>>()?;
    if out.len() != n {
        return Err(PyValueError::new_err(format!(
            "{} ids for {n} fingerprints: give one id per fingerprint",
            out.len()
        )));
    }
    Ok(Some(out))
}

/// Position `i` as its id, or as itself without ids.
fn name(py: Python<'_>, ids: &Option<Vec<Py<PyAny>>>, i: usize) -> PyResult<Py<PyAny>> {
    match ids {
        Some(ids) => Ok(ids[i].clone_ref(py)),
        None => Ok(i.into_pyobject(py)?.into_any().unbind()),
    }
}

/// Every pair of positions `(i, j)`, `i < j`, whose fingerprints are at most `distance`
/// bits apart, exact duplicates included, once each, in increasing order; with `ids` (one
/// per fingerprint, any objects), the pairs are `(ids[i], ids[j])` instead.
///
/// `fingerprints` is any iterable of ints in 0..2**64-1 or a numpy uint64 array.
/// `blocks` is `"auto"` (the planner's choice for the input size) or the number of
/// blocks, above `distance`; a bad layout raises ValueError. The default distance (6) is
/// what the quality evaluation chose for the default fingerprints. Runs in parallel with
/// the GIL released.
///
/// >>> import neardup
/// >>> neardup.find_all([0b1111, 0b0111, 1 << 40, 0b1111], distance=1)
/// [(0, 1), (0, 3), (1, 3)]
/// >>> neardup.find_all([0b1111, 0b0111, 1 << 40], distance=1, ids=["a", "b", "c"])
/// [('a', 'b')]
#[pyfunction]
#[pyo3(signature = (fingerprints, distance = None, blocks = None, ids = None))]
pub fn find_all(
    py: Python<'_>,
    fingerprints: &Bound<'_, PyAny>,
    distance: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
    ids: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(Py<PyAny>, Py<PyAny>)>> {
    let (fps, matcher) = matching(fingerprints, distance, blocks)?;
    let ids = id_list(ids, fps.len())?;
    let pairs = py
        .detach(move || -> neardup::Result<Vec<(usize, usize)>> {
            let indexed = Indexed::new(&fps)?;
            let mut out = Vec::new();
            let done = matcher.find_all_indexed(&indexed, |p| {
                out.push((p.a, p.b));
                Ok::<(), Infallible>(())
            });
            if let Err(never) = done {
                match never {}
            }
            out.par_sort_unstable();
            Ok(out)
        })
        .map_err(core_error)?;
    pairs
        .into_iter()
        .map(|(a, b)| Ok((name(py, &ids, a)?, name(py, &ids, b)?)))
        .collect()
}

/// The connected components of the pairs `find_all` gives, of two or more members each:
/// positions (or `ids`) in increasing input order, components ordered by their first
/// member. Same arguments as `find_all`.
///
/// >>> import neardup
/// >>> neardup.clusters([0b1111, 1 << 40, 0b0111, 0b0011], distance=1)
/// [[0, 2, 3]]
/// >>> neardup.clusters([5, 5, 0xFFFF << 40], ids=["x", "y", "z"])
/// [['x', 'y']]
#[pyfunction]
#[pyo3(signature = (fingerprints, distance = None, blocks = None, ids = None))]
pub fn clusters(
    py: Python<'_>,
    fingerprints: &Bound<'_, PyAny>,
    distance: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
    ids: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Vec<Py<PyAny>>>> {
    let (fps, matcher) = matching(fingerprints, distance, blocks)?;
    let ids = id_list(ids, fps.len())?;
    let found = py
        .detach(move || Indexed::new(&fps).map(|i| matcher.clusters_indexed(&i)))
        .map_err(core_error)?;
    found
        .into_iter()
        .map(|c| c.into_iter().map(|i| name(py, &ids, i)).collect())
        .collect()
}

/// The fingerprints and matcher of `find_all` and `clusters`.
fn matching(
    fingerprints: &Bound<'_, PyAny>,
    distance: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<u64>, Matcher)> {
    let distance = match distance {
        Some(d) => distance_arg(d, 64)?,
        None => DEFAULT_DISTANCE,
    };
    let blocks = match blocks {
        Some(b) => blocks_arg(b)?,
        None => neardup::tables::Blocks::Auto,
    };
    let fps = self::fingerprints(fingerprints)?;
    let layout = batch::layout(blocks, fps.len(), distance).map_err(core_error)?;
    Ok((fps, Matcher::new(layout)))
}

/// One record of `dedup`: an `(id, text)` pair (a tuple, or any sequence of two).
fn record(item: &Bound<'_, PyAny>, i: usize) -> PyResult<(Py<PyAny>, Text)> {
    let bad = || {
        PyTypeError::new_err(format!(
            "records[{i}] must be an (id, text) pair, got {}",
            type_name(item)
        ))
    };
    let (id, text) = if let Ok(t) = item.cast::<PyTuple>() {
        if t.len() != 2 {
            return Err(bad());
        }
        (t.get_item(0)?, t.get_item(1)?)
    } else if let Ok(l) = item.cast::<PyList>() {
        if l.len() != 2 {
            return Err(bad());
        }
        (l.get_item(0)?, l.get_item(1)?)
    } else {
        return Err(bad());
    };
    Ok((
        id.unbind(),
        Text::extract(&text, format_args!("the text of records[{i}]"))?,
    ))
}

/// Clusters of near-duplicate documents in `records`, an iterable of `(id, text)` pairs,
/// as `neardup dedup --clusters` finds them with the same settings: each cluster a list of
/// two or more ids, the kept document first, then the documents removed for it in input
/// order; clusters ordered by their kept document.
///
/// Two documents are near-duplicates when the Jaccard similarity of their word 5-shingle
/// sets is at least `threshold` (default 0.8), as estimated from 128-byte sketches (words
/// are lowercased `\w+` runs, and each character of Chinese, Japanese, Thai and the other
/// scripts written without spaces is a word); or, with `distance`, when their 256-bit
/// fingerprints (`Fingerprinter.fingerprint_wide`, with `fingerprinter`, which applies to
/// `distance` only) are at most `distance` bits apart. Candidates of a threshold are the documents whose sketches' band keys agree in
/// some band (at least 99.95% of the pairs at the threshold); those of a distance are
/// pairs at most `lane_distance` bits apart in some 64-bit lane (default 8), found with
/// `blocks` blocks per lane (`"auto"` or an int above `lane_distance`). A document is
/// removed only for a kept document that is its own near-duplicate; `keep` (`"first"`, `"longest"`, `"shortest"`) chooses which is kept;
/// `closure=True` gives connected components instead (a document may then be removed for
/// one it is not near). Documents without words match only identical texts. Fingerprinting
/// and matching run in parallel with the GIL released.
///
/// >>> import neardup
/// >>> text = "the quick brown fox jumps over the lazy dog " * 5
/// >>> neardup.dedup([("a", text), ("b", "something else entirely"), ("c", text + "again")])
/// [['a', 'c']]
#[pyfunction]
#[pyo3(signature = (records, *, threshold = None, distance = None, keep = "first", closure = false, lane_distance = None, blocks = None, fingerprinter = None))]
#[allow(clippy::too_many_arguments)]
pub fn dedup(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    threshold: Option<f64>,
    distance: Option<&Bound<'_, PyAny>>,
    keep: &str,
    closure: bool,
    lane_distance: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
    fingerprinter: Option<&Bound<'_, Fingerprinter>>,
) -> PyResult<Vec<Vec<Py<PyAny>>>> {
    let rule = match (threshold, distance) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "give threshold or distance, not both",
            ))
        }
        (_, Some(d)) => batch::Rule::Distance(distance_arg(d, 64 * LANES as u32)?),
        (Some(t), None) => batch::Rule::Jaccard(Threshold::new(t).map_err(core_error)?),
        (None, None) => batch::Rule::default(),
    };
    let keep: batch::Keep = keep.parse().map_err(core_error)?;
    let options = batch::Options {
        rule,
        keep,
        closure,
        pairs: false,
    };
    if matches!(rule, batch::Rule::Jaccard(_)) && fingerprinter.is_some() {
        // It would change nothing the caller sees: the clusters of a threshold come from
        // the words, the same in every script.
        return Err(PyValueError::new_err(
            "fingerprinter applies to distance=; a threshold decides by the Jaccard similarity of word 5-shingles, with the same words for every script",
        ));
    }
    if matches!(rule, batch::Rule::Jaccard(_)) && (lane_distance.is_some() || blocks.is_some()) {
        return Err(PyValueError::new_err(
            "lane_distance and blocks apply to distance=; a threshold's candidates come from band keys",
        ));
    }
    let lane_distance = match lane_distance {
        Some(d) => distance_arg(d, 64)?,
        None => core::DEFAULT_LANE_DISTANCE,
    };
    let blocks = match blocks {
        Some(b) => blocks_arg(b)?,
        None => neardup::tables::Blocks::Auto,
    };
    let fp = match fingerprinter {
        Some(f) => f.get().inner.clone(),
        None => default_fingerprinter().clone(),
    };
    let iter = records.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "records must be an iterable of (id, text) pairs, got {}",
            type_name(records)
        ))
    })?;
    let mut ids = Vec::new();
    let mut docs = Vec::new();
    for (i, item) in iter.enumerate() {
        let (id, text) = record(&item?, i)?;
        ids.push(id);
        docs.push(text);
    }
    // As `neardup dedup` does, a bad layout fails before any fingerprinting.
    let layout = batch::layout(blocks, docs.len(), lane_distance).map_err(core_error)?;
    let found = py
        .detach(move || {
            let banding = rule.banding();
            let sigs: Vec<Signature> = docs
                .par_iter()
                .map(|t| Signature::of_text(&fp, banding, t))
                .collect();
            let fps: Vec<core::Wide> = sigs.iter().map(|s| s.fingerprint).collect();
            let hashes: Vec<u64> = sigs.iter().map(|s| s.text_hash).collect();
            let sketches: Vec<Sketch> = sigs.iter().map(|s| s.sketch).collect();
            let keys: Vec<BandKeys> = sigs.iter().map(|s| s.bands).collect();
            let lens: Vec<u32> = docs
                .iter()
                .map(|t| u32::try_from(t.len()).unwrap_or(u32::MAX))
                .collect();
            drop(sigs);
            let matcher = WideMatcher::new(layout, 0);
            let source = match rule {
                batch::Rule::Jaccard(_) => batch::Source::Bands(&keys),
                batch::Rule::Distance(_) => batch::Source::Lanes(&matcher),
            };
            batch::dedup(&fps, &hashes, &lens, &sketches, source, &options)
        })
        .map_err(core_error)?;
    Ok(found
        .clusters
        .into_iter()
        .map(|c| {
            let rep = c.representative;
            std::iter::once(rep)
                .chain(c.members.iter().map(|m| m.doc).filter(|&d| d != rep))
                .map(|d| ids[d as usize].clone_ref(py))
                .collect()
        })
        .collect())
}

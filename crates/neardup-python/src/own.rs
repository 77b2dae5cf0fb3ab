//! neardup's own batch API: `find_all` and `clusters` over fingerprints with optional
//! ids, and `dedup` over `(id, text)` records.

use std::collections::HashMap;
use std::convert::Infallible;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use rayon::prelude::*;

use neardup::batch::{self, Indexed, Matcher, WideMatcher};
use neardup::decide::{Match, Signature};
use neardup::fingerprint::{self as core, DEFAULT_DISTANCE, LANES};
use neardup::jaccard::{self, BandKeys, Sketch, Threshold};

use crate::convert::{blocks_arg, core_error, distance_arg, fingerprints, type_name};
use crate::documents::DocumentStore;
use crate::fingerprinter::{default_fingerprinter, Fingerprinter};
use crate::text::Text;

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
/// `against`, a `DocumentStore` (a data directory's or a Redis Cluster's), also removes
/// the records that are near-duplicates of a stored document, by the store's threshold
/// (`threshold`, if given, must be it), as `neardup dedup --against` does: the answer is
/// that of deduplicating the stored documents followed by `records`, the stored ones kept
/// (not with `distance` or `closure`). The clusters of records removed for a stored
/// document come after the others, the stored document's id first. `save=True` then puts
/// the records kept into `against` (each only if unique), refusing with `ValueError`
/// before any write a kept record whose id is stored or is another kept record's (ids
/// must then be str).
///
/// The pairs whose estimated similarity is within 0.1 of the threshold are decided on
/// the exact Jaccard similarity of their shingle sets, as `neardup dedup` does, unless
/// `exact=False` (every pair on the sketches' estimate, as `neardup dedup --estimate`),
/// or with `distance` or `against` (bits decide; a store keeps no texts), which decide on
/// the estimates; `exact=True` with them is an error.
///
/// >>> import neardup
/// >>> text = "the quick brown fox jumps over the lazy dog " * 5
/// >>> neardup.dedup([("a", text), ("b", "something else entirely"), ("c", text + "again")])
/// [['a', 'c']]
#[pyfunction]
#[pyo3(signature = (records, *, threshold = None, distance = None, keep = "first", closure = false, lane_distance = None, blocks = None, fingerprinter = None, against = None, save = false, exact = None))]
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
    against: Option<&Bound<'_, DocumentStore>>,
    save: bool,
    exact: Option<bool>,
) -> PyResult<Vec<Vec<Py<PyAny>>>> {
    let texts_decide = distance.is_none() && against.is_none();
    if exact == Some(true) && !texts_decide {
        return Err(PyValueError::new_err(
            "exact=True decides the pairs near a threshold on their texts: not with distance= (bits decide) or against= (a store keeps no texts)",
        ));
    }
    let exact = exact.unwrap_or(true) && texts_decide;
    let against = against.map(Bound::get);
    let threshold = match against {
        Some(store) => Some(against_threshold(store, threshold, distance, closure)?),
        None if save => {
            return Err(PyValueError::new_err(
                "save=True saves into the store given as against=",
            ))
        }
        None => threshold,
    };
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
    let banding = options.candidate_banding(exact);
    let sigs: Vec<Signature> = py.detach(|| {
        docs.par_iter()
            .map(|t| Signature::of_text(&fp, banding, t))
            .collect()
    });
    let stored = match against {
        Some(store) => store.most_similar(py, &sigs)?,
        None => Vec::new(),
    };
    let found = py
        .detach(|| {
            let fps: Vec<core::Wide> = sigs.iter().map(|s| s.fingerprint).collect();
            let hashes: Vec<u64> = sigs.iter().map(|s| s.text_hash).collect();
            let sketches: Vec<Sketch> = sigs.iter().map(|s| s.sketch).collect();
            let keys: Vec<BandKeys> = sigs.iter().map(|s| s.bands).collect();
            let lens: Vec<u32> = docs
                .iter()
                .map(|t| u32::try_from(t.len()).unwrap_or(u32::MAX))
                .collect();
            let matcher = WideMatcher::new(layout, 0);
            let source = match rule {
                batch::Rule::Jaccard(_) => batch::Source::Bands(&keys),
                batch::Rule::Distance(_) => batch::Source::Lanes(&matcher),
            };
            let leading = batch::Leading {
                keep: options.keep,
                lens: &lens,
            };
            let c = batch::candidates(&fps, &hashes, source, Some(leading))?;
            let outside = |doc: u32| {
                stored
                    .get(doc as usize)
                    .and_then(Option::as_ref)
                    .map(|h| Match {
                        similarity: h.similarity,
                        distance: h.distance,
                    })
            };
            let (fp, len, sketch) = (
                |d: u32| fps[d as usize],
                |d: u32| lens[d as usize],
                |d: u32| sketches[d as usize],
            );
            match rule {
                batch::Rule::Jaccard(t) if exact => {
                    let mut edges = batch::verify(
                        c.pairs(),
                        |n| sketch(c.first(n)),
                        |n| fp(c.first(n)),
                        options.loosened().rule,
                    );
                    // The shingle sets of the near pairs' nodes, each computed once.
                    let near = batch::near_nodes(&edges, t);
                    let sets: Vec<Vec<u64>> = near
                        .par_iter()
                        .map(|&n| jaccard::shingle_set(&docs[c.first(n) as usize]))
                        .collect();
                    let set = |n: u32| near.binary_search(&n).ok().map(|i| sets[i].as_slice());
                    batch::decide_on_sets(&mut edges, t, set);
                    batch::resolve_verified(&c, edges, fp, len, sketch, &options, outside)
                }
                _ => batch::resolve_against(&c, fp, len, sketch, &options, outside),
            }
        })
        .map_err(core_error)?;
    if let (Some(store), true) = (against, save) {
        save_kept(py, store, &found, &ids, &docs)?;
    }
    let mut clusters: Vec<Vec<Py<PyAny>>> = found
        .clusters
        .iter()
        .map(|c| {
            let rep = c.representative;
            std::iter::once(rep)
                .chain(c.members.iter().map(|m| m.doc).filter(|&d| d != rep))
                .map(|d| ids[d as usize].clone_ref(py))
                .collect()
        })
        .collect();
    // Records removed for stored documents, a cluster per stored document, in the order
    // of their first records.
    let mut at: HashMap<&str, usize> = HashMap::new();
    let first_stored = clusters.len();
    for o in &found.outside {
        let Some(hit) = stored.get(o.first as usize).and_then(Option::as_ref) else {
            continue;
        };
        let i = *at.entry(hit.id.as_str()).or_insert_with(|| {
            clusters.push(vec![PyString::new(py, &hit.id).into_any().unbind()]);
            clusters.len() - 1
        });
        debug_assert!(i >= first_stored);
        clusters[i].push(ids[o.doc as usize].clone_ref(py));
    }
    Ok(clusters)
}

/// The threshold of a dedup against `store`: the store's, which `threshold` must be if
/// given; what a store cannot decide refused.
fn against_threshold(
    store: &DocumentStore,
    threshold: Option<f64>,
    distance: Option<&Bound<'_, PyAny>>,
    closure: bool,
) -> PyResult<f64> {
    if distance.is_some() || closure {
        return Err(PyValueError::new_err(
            "against= decides by the store's Jaccard threshold and keeps the stored documents: not with distance= or closure=True",
        ));
    }
    let theirs = store.decides_at().get();
    match threshold {
        Some(t) if Threshold::new(t).map_err(core_error)? != store.decides_at() => {
            Err(PyValueError::new_err(format!(
                "the store decides at threshold {theirs}, not {t}: give threshold={theirs} or none"
            )))
        }
        _ => Ok(theirs),
    }
}

/// `save=True`: puts the records `found` keeps into `store`, after refusing (before any
/// write) a kept record whose id is not a str, is stored, or is another kept record's.
fn save_kept(
    py: Python<'_>,
    store: &DocumentStore,
    found: &batch::Dedup,
    ids: &[Py<PyAny>],
    docs: &[Text],
) -> PyResult<()> {
    let removed = found.removed();
    let mut kept: Vec<(String, &str)> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, id) in ids
        .iter()
        .enumerate()
        .filter(|&(i, _)| removed.binary_search(&(i as u32)).is_err())
    {
        let id: String = id.bind(py).extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "save=True stores records by id, which must be a str: records[{i}] has {}",
                type_name(id.bind(py))
            ))
        })?;
        if let Some(j) = seen.insert(id.clone(), i) {
            return Err(PyValueError::new_err(format!(
                "save=True: records[{j}] and records[{i}] are both kept and have the id {id:?}; a store holds one document per id. Nothing was saved"
            )));
        }
        kept.push((id, &docs[i]));
    }
    let names: Vec<String> = kept.iter().map(|(id, _)| id.clone()).collect();
    let taken = store.stored(py, &names)?;
    if let Some(i) = taken.iter().position(|&t| t) {
        return Err(PyValueError::new_err(format!(
            "save=True: the kept record with id {:?} has the id of a stored document, which saving would replace. Nothing was saved",
            names[i]
        )));
    }
    store.put_unique(py, kept)?;
    Ok(())
}

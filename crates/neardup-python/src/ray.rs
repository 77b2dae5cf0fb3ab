//! The Rust half of `neardup.ray` (`neardup._neardup.ray`): batch dedup as a Ray job.
//!
//! The Python half moves data between Ray tasks; every step that decides something runs
//! here, on the core's code, so that the job answers as `neardup dedup` does on one
//! machine: signatures of documents ([`Signature::of_text`]), candidates within a bucket
//! of band keys ([`batch::band_candidates`]), verification ([`batch::measure`] and
//! [`Rule::accepts`]), assignment ([`batch::assign`]); and through `neardup-io`, as the
//! CLI: its JSON Lines records ([`docs::json_record`]) and its clusters lines
//! ([`records::cluster_line`]).
//!
//! Arrays cross the boundary as `bytes` of little-endian numbers, which Python reads with
//! `numpy.frombuffer`: no Python object per document. Work on a batch runs with the GIL
//! released, on `threads` threads (a Ray task is given its CPUs; 1 means this thread).

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use rayon::prelude::*;

use neardup::batch::{self, Edge, Keep, Rank, Rule};
use neardup::decide::{Match, Signature};
use neardup::fingerprint::{self as core, Wide, LANES};
use neardup::jaccard::{self, BandKeys, Banding, Sketch, Threshold, BANDS};
use neardup_io::docs::{self, ReadOptions};
use neardup_io::records::{self, Member};

use crate::convert::{bytes_arg, core_error};
use crate::documents::DocumentStore;
use crate::fingerprinter::{default_fingerprinter, Fingerprinter};

/// Little-endian bytes of `values`.
fn bytes_of<T: Copy, const N: usize>(
    py: Python<'_>,
    values: &[T],
    le: impl Fn(T) -> [u8; N],
) -> Py<PyBytes> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&le(v));
    }
    PyBytes::new(py, &out).unbind()
}

/// The numbers in a bytes-like argument of `N`-byte little-endian items named `what`.
fn numbers<T, const N: usize>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    from: impl Fn([u8; N]) -> T,
) -> PyResult<Vec<T>> {
    let raw = bytes_arg(obj, what)?;
    if raw.len() % N != 0 {
        return Err(PyValueError::new_err(format!(
            "{what}: {} bytes is not a whole number of {N}-byte items",
            raw.len()
        )));
    }
    Ok(raw
        .chunks_exact(N)
        .map(|c| {
            let mut b = [0u8; N];
            b.copy_from_slice(c);
            from(b)
        })
        .collect())
}

fn u32s(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u32>> {
    numbers(obj, what, u32::from_le_bytes)
}

fn u64s(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    numbers(obj, what, u64::from_le_bytes)
}

fn f32s(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f32>> {
    numbers(obj, what, f32::from_le_bytes)
}

fn wides(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Wide>> {
    let lanes = u64s(obj, what)?;
    if lanes.len() % LANES != 0 {
        return Err(PyValueError::new_err(format!(
            "{what}: {} lanes is not a whole number of {LANES}-lane fingerprints",
            lanes.len()
        )));
    }
    Ok(lanes
        .chunks_exact(LANES)
        .map(|c| {
            let mut w = [0u64; LANES];
            w.copy_from_slice(c);
            w
        })
        .collect())
}

fn sketches(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Sketch>> {
    numbers(obj, what, |b: [u8; jaccard::BYTES]| Sketch::from_bytes(&b))
}

/// `f` over `items` on `threads` threads (the global pool) or on this one.
fn map_items<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads > 1 {
        items.par_iter().map(&f).collect()
    } else {
        items.iter().map(f).collect()
    }
}

/// The Jaccard rule of `threshold`.
fn jaccard_rule(threshold: f64) -> PyResult<Rule> {
    Ok(Rule::Jaccard(
        Threshold::new(threshold).map_err(core_error)?,
    ))
}

/// The fingerprinter given, or the default.
fn fingerprinter(f: Option<&Bound<'_, Fingerprinter>>) -> core::Fingerprinter {
    match f {
        Some(f) => f.get().inner.clone(),
        None => default_fingerprinter().clone(),
    }
}

/// Signatures of a batch of documents as the arrays Python keeps: text hashes, 256-bit
/// fingerprints (4 lanes each), text lengths in bytes (`neardup dedup`'s, capped at
/// 2^32 - 1), sketches (128 bytes each) and band keys (20 each).
fn signature_arrays(
    py: Python<'_>,
    out: &Bound<'_, PyDict>,
    sigs: &[(Signature, u32)],
) -> PyResult<()> {
    let mut hashes = Vec::with_capacity(sigs.len() * 8);
    let mut fps = Vec::with_capacity(sigs.len() * 8 * LANES);
    let mut lens = Vec::with_capacity(sigs.len() * 4);
    let mut sketch = Vec::with_capacity(sigs.len() * jaccard::BYTES);
    let mut bands = Vec::with_capacity(sigs.len() * 4 * BANDS);
    for (s, len) in sigs {
        hashes.extend_from_slice(&s.text_hash.to_le_bytes());
        for lane in s.fingerprint {
            fps.extend_from_slice(&lane.to_le_bytes());
        }
        lens.extend_from_slice(&len.to_le_bytes());
        sketch.extend_from_slice(&s.sketch.to_bytes());
        for key in s.bands {
            bands.extend_from_slice(&key.to_le_bytes());
        }
    }
    out.set_item("text_hash", PyBytes::new(py, &hashes))?;
    out.set_item("fingerprint", PyBytes::new(py, &fps))?;
    out.set_item("len", PyBytes::new(py, &lens))?;
    out.set_item("sketch", PyBytes::new(py, &sketch))?;
    out.set_item("bands", PyBytes::new(py, &bands))?;
    Ok(())
}

fn sign(fp: &core::Fingerprinter, banding: Banding, text: &str) -> (Signature, u32) {
    (
        Signature::of_text(fp, banding, text),
        u32::try_from(text.len()).unwrap_or(u32::MAX),
    )
}

/// How `neardup dedup` reads a JSON line: the text and id in the fields named so; with
/// `ids_only`, the text of a line of the common shape left unread.
fn read_options(text_field: &str, id_field: &str, ids_only: bool) -> ReadOptions {
    ReadOptions {
        text_field: text_field.into(),
        id_field: id_field.into(),
        ids_only,
        ..ReadOptions::default()
    }
}

/// The id (if the record has one, as JSON text) and the text of a JSON line, or why it
/// has none: what `neardup dedup` reads from a line.
fn record<'a>(
    line: &'a str,
    options: &ReadOptions,
) -> Result<(Option<String>, std::borrow::Cow<'a, str>), String> {
    docs::json_record(line, options).map(|(id, text)| (id.map(|v| v.to_string()), text))
}

/// Signatures of the documents in `data`, whole lines of JSON Lines: per document its line
/// (0-based, in `data`), its id as JSON text (`None` when the record has none), and the
/// signature arrays; `lines` counts every line, blank ones too (not documents, as in
/// `neardup dedup`). A line that is no record stops the batch: `error` is `(line, why)`.
#[pyfunction]
#[pyo3(signature = (data, *, text_field, id_field, threshold, fingerprinter = None, threads = 1))]
#[allow(clippy::too_many_arguments)]
pub fn sign_jsonl<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    text_field: &str,
    id_field: &str,
    threshold: f64,
    fingerprinter: Option<&Bound<'py, Fingerprinter>>,
    threads: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let data = bytes_arg(data, "sign_jsonl")?;
    let banding = jaccard_rule(threshold)?.banding();
    let fp = self::fingerprinter(fingerprinter);
    let options = read_options(text_field, id_field, false);
    type Parsed = Result<Option<(u32, Option<String>, Signature, u32, bool)>, (u32, String)>;
    let (all, parsed) = py.detach(|| {
        let all: Vec<&[u8]> = docs::lines(&data).collect();
        let numbered: Vec<(u32, &[u8])> = (0u32..).zip(all.iter().copied()).collect();
        let parsed: Vec<Parsed> = map_items(&numbered, threads, |&(i, line)| {
            let (text, bad) = docs::decode_line(line);
            if text.trim().is_empty() {
                return Ok(None);
            }
            let (id, body) = record(&text, &options).map_err(|why| (i, why))?;
            let (sig, len) = sign(&fp, banding, &body);
            Ok(Some((i, id, sig, len, bad)))
        });
        (all.len(), parsed)
    });
    let out = PyDict::new(py);
    out.set_item("lines", all)?;
    let mut at = Vec::new();
    let mut ids = Vec::new();
    let mut sigs = Vec::new();
    let mut invalid_utf8 = 0u64;
    let mut text_bytes = 0u64;
    for p in parsed {
        match p {
            Ok(Some((line, id, sig, len, bad))) => {
                at.push(line);
                ids.push(id);
                text_bytes += u64::from(len);
                sigs.push((sig, len));
                invalid_utf8 += u64::from(bad);
            }
            Ok(None) => {}
            Err(e) => {
                out.set_item("error", e)?;
                return Ok(out);
            }
        }
    }
    out.set_item("line", bytes_of(py, &at, u32::to_le_bytes))?;
    out.set_item("ids", PyList::new(py, ids)?)?;
    out.set_item("invalid_utf8", invalid_utf8)?;
    out.set_item("bytes", text_bytes)?;
    signature_arrays(py, &out, &sigs)?;
    Ok(out)
}

/// A document's line (0-based, in its chunk) and its id as JSON text, if it has one.
type LineId = (u32, Option<String>);

/// A kept document for `save=True`: its line (0-based, in its chunk), its id as a store
/// names it (a string id as itself, another value as JSON text; `None` when the record has
/// none) and its text.
type Kept = (u32, Option<String>, String);

/// What [`pick_jsonl`] gives back.
type Picked = (Py<PyBytes>, Vec<LineId>, u32, Vec<Kept>);

/// The second pass over the same `data` ([`sign_jsonl`]'s documents, numbered alike):
/// the records of every document not in `drop`, as `neardup dedup --deduplicated` writes
/// them (the line as read, `\n` ended), for every document in `want` its line and its id
/// as JSON text (`None` when the record has none), with `save` every kept document's line,
/// store id and text (as `neardup dedup --save` stores it), and how many documents `data`
/// holds. `drop` and `want` hold document numbers in increasing order.
#[pyfunction]
#[pyo3(signature = (data, *, text_field, id_field, drop, want, records = true, save = false))]
#[allow(clippy::too_many_arguments)]
pub fn pick_jsonl<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    text_field: &str,
    id_field: &str,
    drop: &Bound<'py, PyAny>,
    want: &Bound<'py, PyAny>,
    records: bool,
    save: bool,
) -> PyResult<Picked> {
    let data = bytes_arg(data, "pick_jsonl")?;
    let (drop, want) = (u32s(drop, "drop")?, u32s(want, "want")?);
    let options = read_options(text_field, id_field, true);
    let whole = read_options(text_field, id_field, false);
    let (kept, ids, count, saved) = py.detach(|| {
        let mut kept = Vec::with_capacity(if records { data.len() } else { 0 });
        let mut ids = Vec::with_capacity(want.len());
        let mut saved = Vec::new();
        let (mut d, mut w) = (drop.iter().peekable(), want.iter().peekable());
        let mut doc = 0u32;
        for (i, line) in (0u32..).zip(docs::lines(&data)) {
            let (text, _) = docs::decode_line(line);
            if text.trim().is_empty() {
                continue;
            }
            if d.peek() == Some(&&doc) {
                d.next();
            } else {
                if records {
                    kept.extend_from_slice(text.as_bytes());
                    kept.push(b'\n');
                }
                if save {
                    // The first pass read this line as a record.
                    if let Ok((id, body)) = docs::json_record(&text, &whole) {
                        saved.push((i, id.as_ref().map(docs::id_text), body.into_owned()));
                    }
                }
            }
            if w.peek() == Some(&&doc) {
                w.next();
                let id = record(&text, &options).ok().and_then(|r| r.0);
                ids.push((i, id));
            }
            doc += 1;
        }
        (kept, ids, doc, saved)
    });
    Ok((PyBytes::new(py, &kept).unbind(), ids, count, saved))
}

/// Signatures of texts held as Arrow holds strings: `offsets` (n + 1 little-endian
/// int64) into the UTF-8 `data`.
#[pyfunction]
#[pyo3(signature = (offsets, data, *, threshold, fingerprinter = None, threads = 1))]
pub fn sign_texts<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    threshold: f64,
    fingerprinter: Option<&Bound<'py, Fingerprinter>>,
    threads: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let offsets = numbers(offsets, "offsets", i64::from_le_bytes)?;
    let data = bytes_arg(data, "sign_texts")?;
    let banding = jaccard_rule(threshold)?.banding();
    let fp = self::fingerprinter(fingerprinter);
    let mut texts = Vec::with_capacity(offsets.len().saturating_sub(1));
    for (i, w) in offsets.windows(2).enumerate() {
        let range = usize::try_from(w[0])
            .ok()
            .zip(usize::try_from(w[1]).ok())
            .filter(|(a, b)| a <= b && *b <= data.len());
        let Some((a, b)) = range else {
            return Err(PyValueError::new_err(format!(
                "text {i}: offsets {}..{} outside the {} bytes of data",
                w[0],
                w[1],
                data.len()
            )));
        };
        let text = std::str::from_utf8(&data[a..b])
            .map_err(|e| PyValueError::new_err(format!("text {i} is not UTF-8: {e}")))?;
        texts.push(text);
    }
    let sigs = py.detach(|| map_items(&texts, threads, |t| sign(&fp, banding, t)));
    let out = PyDict::new(py);
    out.set_item("bytes", sigs.iter().map(|s| u64::from(s.1)).sum::<u64>())?;
    signature_arrays(py, &out, &sigs)?;
    Ok(out)
}

/// The candidate pairs of one bucket of band keys: `keys[i]` (band << 32 | key) is a key
/// of node `nodes[i]` (numbered 0..n in input order); pairs `(a, b)`, `a < b`, of nodes
/// whose keys agree in some band, each once, as [`batch::band_candidates`] finds them, a
/// crowded run led by the nodes `keep` keeps first by their texts' lengths `lens` (u32
/// per node; needed unless `keep` is "first").
#[pyfunction]
#[pyo3(signature = (keys, nodes, n, lens = None, keep = "first"))]
pub fn bucket_pairs(
    py: Python<'_>,
    keys: &Bound<'_, PyAny>,
    nodes: &Bound<'_, PyAny>,
    n: usize,
    lens: Option<&Bound<'_, PyAny>>,
    keep: &str,
) -> PyResult<(Py<PyBytes>, Py<PyBytes>)> {
    let (keys, nodes) = (u64s(keys, "keys")?, u32s(nodes, "nodes")?);
    let keep: Keep = keep
        .parse()
        .map_err(|e: neardup::Error| PyValueError::new_err(e.to_string()))?;
    let lens = match lens {
        Some(l) => u32s(l, "lens")?,
        None if keep == Keep::First => vec![0; n],
        None => {
            return Err(PyValueError::new_err(
                "lens are needed to lead crowded runs unless keep is 'first'",
            ))
        }
    };
    if lens.len() != n {
        return Err(PyValueError::new_err(format!(
            "{} lens for {n} nodes",
            lens.len()
        )));
    }
    if keys.len() != nodes.len() {
        return Err(PyValueError::new_err(format!(
            "{} keys for {} nodes",
            keys.len(),
            nodes.len()
        )));
    }
    let mut table: Vec<BandKeys> = vec![[0; BANDS]; n];
    for (&k, &node) in keys.iter().zip(&nodes) {
        let band = (k >> 32) as usize;
        match table.get_mut(node as usize) {
            Some(row) if band < BANDS => row[band] = k as u32,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "key of band {band} for node {node}: bands are 0..{BANDS}, nodes 0..{n}"
                )))
            }
        }
    }
    let pairs = py
        .detach(|| {
            let mut pairs: Vec<(u32, u32)> = Vec::new();
            let rank = |i: u32| {
                batch::Rank {
                    len: lens[i as usize],
                    position: u64::from(i),
                }
                .key(keep)
            };
            batch::band_candidates(
                n,
                |i| &table[i],
                batch::Crowded::Led(|docs: &mut [u32]| docs.sort_by_key(|&i| rank(i))),
                |a, b| -> neardup::Result<()> {
                    pairs.push((a as u32, b as u32));
                    Ok(())
                },
            )
            .map(|_| pairs)
        })
        .map_err(core_error)?;
    let a: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let b: Vec<u32> = pairs.iter().map(|p| p.1).collect();
    Ok((
        bytes_of(py, &a, u32::to_le_bytes),
        bytes_of(py, &b, u32::to_le_bytes),
    ))
}

/// How near each pair `i` of nodes is ([`batch::measure`]): similarities (f32),
/// distances (u32), and whether the Jaccard rule of `threshold` accepts it (one byte,
/// 1 for yes; all 1 without a threshold).
#[pyfunction]
#[pyo3(signature = (sketch_a, sketch_b, fingerprint_a, fingerprint_b, threshold = None))]
pub fn measure(
    py: Python<'_>,
    sketch_a: &Bound<'_, PyAny>,
    sketch_b: &Bound<'_, PyAny>,
    fingerprint_a: &Bound<'_, PyAny>,
    fingerprint_b: &Bound<'_, PyAny>,
    threshold: Option<f64>,
) -> PyResult<(Py<PyBytes>, Py<PyBytes>, Py<PyBytes>)> {
    let rule = threshold.map(jaccard_rule).transpose()?;
    let (sa, sb) = (
        sketches(sketch_a, "sketch_a")?,
        sketches(sketch_b, "sketch_b")?,
    );
    let (fa, fb) = (
        wides(fingerprint_a, "fingerprint_a")?,
        wides(fingerprint_b, "fingerprint_b")?,
    );
    let n = sa.len();
    if sb.len() != n || fa.len() != n || fb.len() != n {
        return Err(PyValueError::new_err(format!(
            "pairs of different lengths: {n}, {}, {}, {} sketches and fingerprints",
            sb.len(),
            fa.len(),
            fb.len()
        )));
    }
    let found = py.detach(|| {
        (0..n)
            .map(|i| {
                let m = batch::measure(&sa[i], &sb[i], &fa[i], &fb[i]);
                (m, rule.is_none_or(|r| r.accepts(m)))
            })
            .collect::<Vec<_>>()
    });
    let sim: Vec<f32> = found.iter().map(|f| f.0.similarity).collect();
    let dist: Vec<u32> = found.iter().map(|f| f.0.distance).collect();
    let ok: Vec<u8> = found.iter().map(|f| u8::from(f.1)).collect();
    Ok((
        bytes_of(py, &sim, f32::to_le_bytes),
        bytes_of(py, &dist, u32::to_le_bytes),
        PyBytes::new(py, &ok).unbind(),
    ))
}

/// For `against=`: each node's most similar near-duplicate in `store`, the nodes given by
/// their text hashes, sketches (128 bytes each), band keys (20 u32 each) and 256-bit
/// fingerprints (4 u64 each): per node the index of its stored document's id in the
/// returned list (u32, `u32::MAX` for none), the similarity (f32) and the distance (u32);
/// and the list of ids.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn stored_matches(
    py: Python<'_>,
    store: &Bound<'_, DocumentStore>,
    text_hash: &Bound<'_, PyAny>,
    sketch: &Bound<'_, PyAny>,
    bands: &Bound<'_, PyAny>,
    fingerprint: &Bound<'_, PyAny>,
) -> PyResult<(Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Vec<String>)> {
    let hashes = u64s(text_hash, "text_hash")?;
    let sketches = sketches(sketch, "sketch")?;
    let (keys, fps) = (u32s(bands, "bands")?, wides(fingerprint, "fingerprint")?);
    let n = hashes.len();
    if sketches.len() != n || keys.len() != n * BANDS || fps.len() != n {
        return Err(PyValueError::new_err("node arrays of different lengths"));
    }
    let sigs: Vec<Signature> = (0..n)
        .map(|i| {
            let mut bands: BandKeys = [0; BANDS];
            bands.copy_from_slice(&keys[i * BANDS..(i + 1) * BANDS]);
            Signature {
                fingerprint: fps[i],
                sketch: sketches[i],
                bands,
                text_hash: hashes[i],
            }
        })
        .collect();
    let hits = store.get().most_similar(py, &sigs)?;
    let mut ids: Vec<String> = Vec::new();
    let mut at: HashMap<String, u32> = HashMap::new();
    let (mut index, mut sim, mut dist) = (Vec::new(), Vec::new(), Vec::new());
    for hit in hits {
        let Some(hit) = hit else {
            index.push(u32::MAX);
            sim.push(0.0);
            dist.push(0);
            continue;
        };
        let i = *at.entry(hit.id.clone()).or_insert_with(|| {
            ids.push(hit.id.clone());
            ids.len() as u32 - 1
        });
        index.push(i);
        sim.push(hit.similarity);
        dist.push(hit.distance);
    }
    Ok((
        bytes_of(py, &index, u32::to_le_bytes),
        bytes_of(py, &sim, f32::to_le_bytes),
        bytes_of(py, &dist, u32::to_le_bytes),
        ids,
    ))
}

/// [`batch::assign_against`] over nodes `0..n` (`lens[i]`, `positions[i]` rank node `i`)
/// and the verified edges `(a[j], b[j])` with their similarities and distances, and for
/// `against=` each node's most similar stored near-duplicate (`outside[i]` 1 when it has
/// one, with `outside_similarity[i]` and `outside_distance[i]`): per node, the node it goes
/// with (itself when kept, `u32::MAX` for a stored document), and how near (similarity
/// f32, distance u32, and one byte: 1 when known, 0 for a member of a component with
/// `closure`).
#[pyfunction]
#[pyo3(signature = (lens, positions, a, b, similarity, distance, keep, closure, outside = None, outside_similarity = None, outside_distance = None))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
pub fn assign(
    py: Python<'_>,
    lens: &Bound<'_, PyAny>,
    positions: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    similarity: &Bound<'_, PyAny>,
    distance: &Bound<'_, PyAny>,
    keep: &str,
    closure: bool,
    outside: Option<&Bound<'_, PyAny>>,
    outside_similarity: Option<&Bound<'_, PyAny>>,
    outside_distance: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Py<PyBytes>)> {
    let keep: Keep = keep.parse().map_err(core_error)?;
    let (lens, positions) = (u32s(lens, "lens")?, u64s(positions, "positions")?);
    if lens.len() != positions.len() {
        return Err(PyValueError::new_err(format!(
            "{} lengths for {} positions",
            lens.len(),
            positions.len()
        )));
    }
    let (a, b) = (u32s(a, "a")?, u32s(b, "b")?);
    let (sim, dist) = (f32s(similarity, "similarity")?, u32s(distance, "distance")?);
    let m = a.len();
    if b.len() != m || sim.len() != m || dist.len() != m {
        return Err(PyValueError::new_err("edges of different lengths"));
    }
    let ranks: Vec<Rank> = lens
        .iter()
        .zip(&positions)
        .map(|(&len, &position)| Rank { len, position })
        .collect();
    let edges: Vec<Edge> = (0..m)
        .map(|j| Edge {
            a: a[j],
            b: b[j],
            similarity: sim[j],
            distance: dist[j],
        })
        .collect();
    let matched: Vec<Option<Match>> = match (outside, outside_similarity, outside_distance) {
        (Some(o), Some(s), Some(d)) => {
            let (o, s, d) = (
                bytes_arg(o, "outside")?,
                f32s(s, "outside_similarity")?,
                u32s(d, "outside_distance")?,
            );
            if o.len() != lens.len() || s.len() != o.len() || d.len() != o.len() {
                return Err(PyValueError::new_err(
                    "outside matches of different lengths",
                ));
            }
            (0..o.len())
                .map(|i| {
                    (o[i] != 0).then_some(Match {
                        similarity: s[i],
                        distance: d[i],
                    })
                })
                .collect()
        }
        (None, None, None) => Vec::new(),
        _ => {
            return Err(PyValueError::new_err(
                "outside, outside_similarity and outside_distance go together",
            ))
        }
    };
    let links = py
        .detach(|| batch::assign_against(&ranks, &edges, keep, closure, &matched))
        .map_err(core_error)?;
    let to: Vec<u32> = links.iter().map(|l| l.to).collect();
    let near = |f: fn(&neardup::decide::Match) -> u32| -> Vec<u32> {
        links.iter().map(|l| l.near.as_ref().map_or(0, f)).collect()
    };
    let sims = near(|m| m.similarity.to_bits());
    let dists = near(|m| m.distance);
    let known: Vec<u8> = links.iter().map(|l| u8::from(l.near.is_some())).collect();
    Ok((
        bytes_of(py, &to, u32::to_le_bytes),
        bytes_of(py, &sims, u32::to_le_bytes),
        bytes_of(py, &dists, u32::to_le_bytes),
        PyBytes::new(py, &known).unbind(),
    ))
}

/// Clusters as `neardup dedup --clusters` writes them, one JSON line each, numbered from
/// `first`: the rows `(reps[i], docs[i], similarity[i], distance[i])` with `ids[i]` the
/// JSON text of `docs[i]`'s id, sorted by representative then document, the
/// representative's own row (`docs[i] == reps[i]`) among its members. Representatives
/// from `stored_from` on are stored documents (`"stored": true`). Returns the lines and
/// how many clusters they hold.
#[pyfunction]
#[pyo3(signature = (reps, docs, similarity, distance, ids, first, stored_from = u64::MAX))]
#[allow(clippy::too_many_arguments)]
pub fn cluster_lines(
    py: Python<'_>,
    reps: &Bound<'_, PyAny>,
    docs: &Bound<'_, PyAny>,
    similarity: &Bound<'_, PyAny>,
    distance: &Bound<'_, PyAny>,
    ids: Vec<String>,
    first: u64,
    stored_from: u64,
) -> PyResult<(Py<PyBytes>, u64)> {
    let (reps, docs) = (u64s(reps, "reps")?, u64s(docs, "docs")?);
    let (sim, dist) = (f32s(similarity, "similarity")?, u32s(distance, "distance")?);
    let n = reps.len();
    if docs.len() != n || sim.len() != n || dist.len() != n || ids.len() != n {
        return Err(PyValueError::new_err("cluster rows of different lengths"));
    }
    let found = py.detach(|| -> Result<(String, u64), String> {
        let mut out = String::new();
        let mut count = 0u64;
        let mut start = 0;
        while start < n {
            let rep = reps[start];
            let end = start + reps[start..].iter().take_while(|&&r| r == rep).count();
            let Some(own) = (start..end).find(|&i| docs[i] == rep) else {
                return Err(format!("cluster of {rep} without its representative's row"));
            };
            let members = (start..end).map(|i| Member {
                id: &ids[i],
                similarity: sim[i],
                distance: dist[i],
            });
            records::cluster_line(&mut out, first + count, &ids[own], members);
            if rep >= stored_from {
                // As `neardup dedup --against` marks a stored representative.
                out.pop();
                out.push_str(r#","stored":true}"#);
            }
            out.push('\n');
            count += 1;
            start = end;
        }
        Ok((out, count))
    });
    let (text, count) = found.map_err(PyValueError::new_err)?;
    Ok((PyBytes::new(py, text.as_bytes()).unbind(), count))
}

//! The legacy fingerprints of old simhash-py (`hash`, `hash_fp`) and simhash-cpp before
//! 2017 (`legacy_cpp_fingerprint`), and their parts (`jenkins64`, `cyclic3`,
//! `legacy_cpp_tokens`), on the core's `compat` module. Re-exported by `neardup.simhash`.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyList, PyString};

use neardup::fingerprint::compat;

use crate::convert::{bytes_arg, detach_if, each, fingerprints, type_name, u64_arg};

/// Inputs at least this long are hashed with the GIL released.
const DETACH_AT: usize = 1 << 16;

/// Old simhash-py `hash(text)`: the pieces of `text` split on the regex `\W+` (not
/// lowercased, empty pieces skipped), each hashed with `jenkins64` of its UTF-8, then
/// `cyclic3`, and the bit-reversed `compute` of that stream. `text` is a str.
///
/// >>> from neardup import simhash
/// >>> hex(simhash.hash("hello world"))
/// '0x1a40201a26358020'
/// >>> simhash.hash("") == simhash.hash(" ,. ") == 0
/// True
#[pyfunction]
pub fn hash(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<u64> {
    let text = text.extract::<PyBackedStr>().map_err(|_| {
        PyTypeError::new_err(format!(
            "hash() expects str, not {}{}",
            type_name(text),
            if text.is_instance_of::<PyBytes>() {
                " (decode it first, e.g. data.decode('utf-8'))"
            } else {
                ""
            }
        ))
    })?;
    Ok(detach_if(py, text.len() >= DETACH_AT, || {
        compat::legacy_py_hash(&text)
    }))
}

/// Old simhash-py `hash_fp(values)`: `jenkins64` of each value's 8 little-endian bytes,
/// then `cyclic3`, and the bit-reversed `compute` of that stream. `values` is an iterable
/// of signed 64-bit ints; one outside -2**63..2**63-1 raises OverflowError.
///
/// >>> from neardup import simhash
/// >>> hex(simhash.hash_fp([0]))
/// '0x79731fc2fd21831a'
/// >>> simhash.hash_fp([]) == 0
/// True
#[pyfunction]
pub fn hash_fp(py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<u64> {
    let v = i64_list(values)?;
    Ok(detach_if(py, v.len() >= DETACH_AT, || {
        compat::legacy_py_hash_fp(&v)
    }))
}

/// Bob Jenkins' lookup3 `hashlittle2` of `data` (bytes), seeded with
/// `(pc, pb) = (seed >> 32, seed & 0xffffffff)`, returned as `(pc << 32) | pb`: the token
/// hash of the legacy fingerprints. `seed` is an int in 0..2**64-1.
///
/// >>> from neardup import simhash
/// >>> hex(simhash.jenkins64(b""))
/// '0xdeadbeefdeadbeef'
/// >>> hex(simhash.jenkins64(b"hello", seed=1))
/// '0xfcee44a03d01ca34'
#[pyfunction]
#[pyo3(signature = (data, seed = None))]
pub fn jenkins64(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    seed: Option<&Bound<'_, PyAny>>,
) -> PyResult<u64> {
    let data = bytes_arg(data, "jenkins64")?;
    let seed = seed.map_or(Ok(0), |s| u64_arg(s, "seed"))?;
    Ok(detach_if(py, data.len() >= DETACH_AT, || {
        compat::jenkins64(&data, seed)
    }))
}

/// The legacy cyclic hash over a window of 3, as a list as long as `hashes` (ints in
/// 0..2**64-1, or a numpy uint64 array): for each hash `h` at index `i`,
/// `cur = rotl(cur, 1) ^ rotl(ring[i % 3], 3) ^ h; ring[i % 3] = h`, giving `cur`.
///
/// >>> from neardup import simhash
/// >>> simhash.cyclic3([1, 2, 4, 8])
/// [1, 0, 4, 8]
#[pyfunction]
pub fn cyclic3(hashes: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    Ok(compat::cyclic3(fingerprints(hashes)?).collect())
}

/// The tokens of legacy simhash-cpp: the maximal runs of ASCII letters in `data` (bytes)
/// before its first NUL byte, as a list of bytes.
///
/// >>> from neardup import simhash
/// >>> simhash.legacy_cpp_tokens(b"what's new?How5is\x00 ignored")
/// [b'what', b's', b'new', b'How', b'is']
#[pyfunction]
pub fn legacy_cpp_tokens<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let data = bytes_arg(data, "legacy_cpp_tokens")?;
    PyList::new(
        py,
        compat::legacy_cpp_tokens(&data).map(|t| PyBytes::new(py, t)),
    )
}

/// The text fingerprint of simhash-cpp before 2017: `legacy_cpp_tokens(data)`, each
/// hashed with `jenkins64`, then `cyclic3`, and the bit-reversed `compute` of that
/// stream. `data` is bytes (encode a str first).
///
/// >>> from neardup import simhash
/// >>> hex(simhash.legacy_cpp_fingerprint(b"hello world"))
/// '0x1a40201a26358020'
#[pyfunction]
pub fn legacy_cpp_fingerprint(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
    let data = bytes_arg(data, "legacy_cpp_fingerprint")?;
    Ok(detach_if(py, data.len() >= DETACH_AT, || {
        compat::legacy_cpp_fingerprint(&data)
    }))
}

/// Signed 64-bit ints from any iterable (a list is read by index); one out of range is an
/// `OverflowError`, a str or bytes (iterable, but not of ints) a `TypeError`.
fn i64_list(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "hash_fp() expects an iterable of ints, not {}",
            type_name(obj)
        )));
    }
    let one = |item: &Bound<'_, PyAny>| {
        item.extract::<i64>().map_err(|e| {
            if e.is_instance_of::<PyOverflowError>(item.py()) {
                PyOverflowError::new_err(format!(
                    "value {} is outside -2**63..2**63-1",
                    item.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                ))
            } else {
                e
            }
        })
    };
    each(obj, "hash_fp() expects an iterable of ints", one)
}

//! Python arguments to Rust values, and core errors to Python exceptions.

use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList, PyMemoryView, PyString, PyType};

use neardup::tables::{Blocks, Layout};
use neardup_store::StoreError;

/// A core error as a Python exception: every core error is a caller's choice that cannot
/// work (a layout, a size), so `ValueError`.
pub fn core_error(e: neardup::Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Fingerprints from any iterable of ints, or from an object exporting a one-dimensional
/// buffer of 8-byte integers (a numpy `uint64` or non-negative `int64` array, an
/// `array.array('Q')`), which is read in one bulk copy instead of element by element.
///
/// An int outside 0..2^64-1 raises `OverflowError`, anything else that is not an int
/// `TypeError`.
pub fn fingerprints(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    if let Some(v) = from_buffer(obj)? {
        return Ok(v);
    }
    each(
        obj,
        "expected an iterable of ints or a buffer of uint64",
        fingerprint,
    )
}

/// `one` of every item of the iterable `obj` (a list is read by index, without the
/// iterator protocol); anything not iterable is a `TypeError` saying `expected`.
pub fn each<T>(
    obj: &Bound<'_, PyAny>,
    expected: &str,
    one: impl Fn(&Bound<'_, PyAny>) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    if let Ok(list) = obj.cast::<PyList>() {
        return list.iter().map(|item| one(&item)).collect();
    }
    let iter = obj
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{expected}, got {}", type_name(obj))))?;
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for item in iter {
        out.push(one(&item?)?);
    }
    Ok(out)
}

/// `f()`, with the GIL released when `big` (enough work for the release to pay).
pub fn detach_if<R: Send>(py: Python<'_>, big: bool, f: impl FnOnce() -> R + Send) -> R {
    if big {
        py.detach(f)
    } else {
        f()
    }
}

/// One fingerprint: an int (or anything with `__index__`, like `numpy.uint64`) in
/// 0..2^64-1.
pub fn fingerprint(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    u64_arg(obj, "fingerprint")
}

/// An int (or anything with `__index__`) in 0..2^64-1: out of range, `OverflowError`
/// naming `what`; not an int, PyO3's `TypeError`.
pub fn u64_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    obj.extract::<u64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            PyOverflowError::new_err(format!(
                "{what} {} is outside 0..2**64-1",
                obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        } else {
            e
        }
    })
}

/// The bytes of a bytes-like argument of `func` (`bytes`, `bytearray` or `memoryview`);
/// anything else, a `str` included, is a `TypeError`.
pub fn bytes_arg(obj: &Bound<'_, PyAny>, func: &str) -> PyResult<PyBackedBytes> {
    if obj.is_instance_of::<PyMemoryView>() {
        return Ok(obj.call_method0("tobytes")?.extract::<PyBackedBytes>()?);
    }
    obj.extract::<PyBackedBytes>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{func}() expects bytes, not {}{}",
            type_name(obj),
            if obj.is_instance_of::<PyString>() {
                " (encode it first, e.g. text.encode('utf-8'))"
            } else {
                ""
            }
        ))
    })
}

/// An I/O error as the `OSError` subclass Python raises for it (`FileNotFoundError`,
/// `PermissionError`, ...), with `message` before the system's.
pub fn io_error(py: Python<'_>, e: std::io::Error, message: &str) -> PyErr {
    let message = format!("{message}: {e}");
    PyErr::from_type(PyErr::from(e).get_type(py), message)
}

/// The type name of `obj`, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}

/// How the 8-byte items of a buffer are stored.
#[derive(Clone, Copy)]
enum Order {
    Native,
    Little,
    Big,
}

/// The values of a one-dimensional buffer of 8-byte integers, or `None` for any other
/// object (read as an iterable instead).
///
/// `memoryview` rather than PyO3's `PyBuffer`: the buffer protocol joined the stable ABI
/// only in Python 3.11, and this module is built for the 3.9 stable ABI.
fn from_buffer(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u64>>> {
    // Lists and tuples, the common case, export no buffer: skip the failed memoryview.
    if obj.cast::<PyList>().is_ok() || obj.is_instance_of::<pyo3::types::PyTuple>() {
        return Ok(None);
    }
    let Ok(view) = PyMemoryView::from(obj) else {
        return Ok(None);
    };
    let itemsize: usize = view.getattr("itemsize")?.extract()?;
    let ndim: usize = view.getattr("ndim")?.extract()?;
    if itemsize != 8 || ndim != 1 {
        return Ok(None);
    }
    let format: String = view.getattr("format")?.extract()?;
    let (order, code) = match format.as_bytes() {
        [c] | [b'@' | b'=', c] => (Order::Native, *c),
        [b'<', c] => (Order::Little, *c),
        [b'>' | b'!', c] => (Order::Big, *c),
        _ => return Ok(None),
    };
    let signed = match code {
        b'Q' | b'L' => false,
        b'q' | b'l' => true,
        _ => return Ok(None),
    };
    // One copy into contiguous bytes, whatever the strides.
    let bytes = view.call_method0("tobytes")?;
    let bytes = bytes.cast::<PyBytes>()?;
    let raw = bytes.as_bytes();
    let values: Vec<u64> = raw
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            match order {
                Order::Native => u64::from_ne_bytes(b),
                Order::Little => u64::from_le_bytes(b),
                Order::Big => u64::from_be_bytes(b),
            }
        })
        .collect();
    if signed {
        if let Some((i, &v)) = values.iter().enumerate().find(|(_, &v)| v >> 63 == 1) {
            return Err(PyOverflowError::new_err(format!(
                "fingerprint {} at index {i} is outside 0..2**64-1",
                v as i64
            )));
        }
    }
    Ok(Some(values))
}

/// A layout from Python ints, every bad one a `ValueError`: `blocks` in 1..=64,
/// `distance` below it, and not too many tables.
pub fn layout(blocks: &Bound<'_, PyAny>, distance: &Bound<'_, PyAny>) -> PyResult<Layout> {
    let (blocks, distance) = layout_args(blocks, distance)?;
    Layout::new(blocks, distance).map_err(core_error)
}

/// `blocks` and `distance` as the core takes them; a negative or huge value is a
/// `ValueError`, like any other bad layout (simhash-py aborted the interpreter).
pub fn layout_args(
    blocks: &Bound<'_, PyAny>,
    distance: &Bound<'_, PyAny>,
) -> PyResult<(usize, u32)> {
    let b = int_arg(blocks, "number of blocks", 1, 64)?;
    let d = int_arg(distance, "distance", 0, 64)?;
    // Both are in range, so neither conversion can fail.
    Ok((b as usize, d as u32))
}

/// An int argument in `min..=max` (bounds no valid layout goes beyond; the core checks the
/// rest with its own messages), else `ValueError`; not an int, `TypeError`.
fn int_arg(obj: &Bound<'_, PyAny>, what: &str, min: i64, max: i64) -> PyResult<i64> {
    let out_of_range = || {
        PyValueError::new_err(format!(
            "{what} must be between {min} and {max}, got {}",
            obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    };
    match obj.extract::<i64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(_) => Err(out_of_range()),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Err(out_of_range()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be an int, got {}",
            type_name(obj)
        ))),
    }
}

/// `blocks` as the own API takes it: `"auto"` (the planner's choice) or an int in 1..=64.
pub fn blocks_arg(obj: &Bound<'_, PyAny>) -> PyResult<Blocks> {
    if let Ok(s) = obj.cast::<pyo3::types::PyString>() {
        let s = s.to_cow()?;
        return if s.eq_ignore_ascii_case("auto") {
            Ok(Blocks::Auto)
        } else {
            Err(PyValueError::new_err(format!(
                "blocks must be 'auto' or an int, got {s:?}"
            )))
        };
    }
    Ok(Blocks::Fixed(
        int_arg(obj, "number of blocks", 1, 64)? as usize
    ))
}

/// A distance in `0..=max`.
pub fn distance_arg(obj: &Bound<'_, PyAny>, max: u32) -> PyResult<u32> {
    count_arg(obj, "distance", max)
}

/// A count named `what` in `0..=max`.
pub fn count_arg(obj: &Bound<'_, PyAny>, what: &str, max: u32) -> PyResult<u32> {
    // In range, so the conversion cannot fail.
    Ok(int_arg(obj, what, 0, i64::from(max))? as u32)
}

/// A non-negative size hint (`expected`), capped rather than refused when huge.
pub fn size_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    let v = int_arg(obj, what, 0, i64::MAX)?;
    Ok(usize::try_from(v).unwrap_or(usize::MAX))
}

/// A document id of the in-memory `Corpus`: an int in 0..2^64-1.
pub fn id(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    obj.extract::<u64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            PyOverflowError::new_err(format!(
                "id {} is outside 0..2**64-1",
                obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        } else {
            PyTypeError::new_err(format!("an id must be an int, got {}", type_name(obj)))
        }
    })
}

/// A store error as the exception of `neardup` (defined in Python, in `neardup/_errors.py`,
/// so that they can also be `FileNotFoundError`, `FileExistsError` or `ValueError`).
pub(crate) fn store_error(py: Python<'_>, e: StoreError) -> PyErr {
    let e = match e {
        StoreError::Core(core) => return core_error(core),
        other => other,
    };
    let class = match &e {
        StoreError::NotAStore(_) => "NotAStoreError",
        StoreError::Exists(_) => "StoreExistsError",
        StoreError::Foreign { .. } | StoreError::Mismatch { .. } => "ForeignStoreError",
        _ => "StoreError",
    };
    let message = e.to_string();
    match py
        .import("neardup._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from))
    {
        Ok(class) => PyErr::from_type(class, message),
        // Only a broken installation lacks the module: still report the store's message.
        Err(_) => PyRuntimeError::new_err(message),
    }
}

/// A time to live in seconds, as the store takes it.
pub(crate) fn ttl_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let secs: f64 = obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "ttl must be a number of seconds or None, got {}",
            type_name(obj)
        ))
    })?;
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|_| PyValueError::new_err(format!("ttl must be 0 or more seconds, got {secs}")))
}

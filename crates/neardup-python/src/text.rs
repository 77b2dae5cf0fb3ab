//! Python `str` arguments as Rust `&str`, without copying them where the interpreter
//! allows.
//!
//! Built for the stable ABI of Python 3.9, PyO3's `PyBackedStr` copies every string into
//! a new `bytes` object, because `PyUnicode_AsUTF8AndSize` joined the stable ABI only in
//! 3.10. For `fingerprint_many` over a list of documents, that copy (made while holding
//! the GIL, before the threads start) took a third of the call's time on two cores.
//! CPython has had the function since 3.3, and on Linux and macOS an extension module
//! finds it in the running interpreter, whichever version that is, so it is called here.
//! For an ASCII string it returns the string's own bytes, with no copy at all; for others
//! the UTF-8 that CPython caches in the object. Windows extensions link to `python3.dll`,
//! which exports the function only from 3.10, so Windows keeps the copy.

use std::ops::Deref;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::type_name;

/// The UTF-8 of a Python `str`, which it keeps alive.
pub struct Text(Inner);

#[cfg(not(windows))]
struct Inner {
    /// Owns the memory `utf8` points into: CPython keeps a str's UTF-8 as long as the str.
    _owner: Py<PyString>,
    utf8: std::ptr::NonNull<u8>,
    len: usize,
}

#[cfg(windows)]
struct Inner(pyo3::pybacked::PyBackedStr);

// SAFETY: `utf8` points into memory owned by the str in `_owner`, which is immutable and
// is freed only with the str; `Py` keeps the str alive from any thread.
#[cfg(not(windows))]
unsafe impl Send for Inner {}
// SAFETY: as for `Send`; nothing writes through `utf8`.
#[cfg(not(windows))]
unsafe impl Sync for Inner {}

#[cfg(not(windows))]
mod ffi {
    use pyo3::ffi::{PyObject, Py_ssize_t};
    use std::os::raw::c_char;

    extern "C" {
        /// CPython's, since 3.3 (see the module's comment).
        pub fn PyUnicode_AsUTF8AndSize(
            unicode: *mut PyObject,
            size: *mut Py_ssize_t,
        ) -> *const c_char;
    }
}

impl Text {
    /// The text of `obj`, which must be a `str` (a `TypeError` naming `what` otherwise); a
    /// `str` that is not valid Unicode (a lone surrogate) is a `ValueError`.
    pub fn extract(obj: &Bound<'_, PyAny>, what: impl std::fmt::Display) -> PyResult<Text> {
        let Ok(s) = obj.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "{what} must be a str, got {}",
                type_name(obj)
            )));
        };
        let not_utf8 = |e: PyErr| {
            PyValueError::new_err(format!(
                "{what} cannot be read as UTF-8: {}",
                e.value(obj.py())
            ))
        };
        #[cfg(not(windows))]
        {
            let mut len: pyo3::ffi::Py_ssize_t = 0;
            // SAFETY: `s` is a live str and the GIL is held (we have a `Bound`).
            let utf8 = unsafe { ffi::PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut len) };
            let Some(utf8) = std::ptr::NonNull::new(utf8.cast_mut().cast::<u8>()) else {
                return Err(not_utf8(PyErr::fetch(obj.py())));
            };
            Ok(Text(Inner {
                _owner: s.clone().unbind(),
                utf8,
                len: len.max(0) as usize,
            }))
        }
        #[cfg(windows)]
        {
            s.extract::<pyo3::pybacked::PyBackedStr>()
                .map(|t| Text(Inner(t)))
                .map_err(not_utf8)
        }
    }
}

impl Deref for Text {
    type Target = str;

    #[cfg(not(windows))]
    fn deref(&self) -> &str {
        let Inner { utf8, len, .. } = &self.0;
        // SAFETY: CPython returned `len` bytes of UTF-8 at `utf8`, which live (unchanged)
        // as long as the str `self` holds.
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(utf8.as_ptr(), *len)) }
    }

    #[cfg(windows)]
    fn deref(&self) -> &str {
        &self.0 .0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self
    }
}

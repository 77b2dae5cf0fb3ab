//! `FingerprintStore`: the durable fingerprint store of neardup-store, with string ids
//! and expiry (`Store` before; the name is kept as a deprecated alias in `neardup`).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyString, PyTuple};

use neardup::tables::Blocks;
use neardup_store::{FingerprintReader, StoreConfig, StoreError};

use crate::convert::{
    blocks_arg, distance_arg, fingerprint, size_arg, store_error, ttl_arg, type_name,
};

/// A document id of a `FingerprintStore`: a str.
fn str_id(obj: &Bound<'_, PyAny>) -> PyResult<PyBackedStr> {
    if !obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "a FingerprintStore id must be a str, got {}",
            type_name(obj)
        )));
    }
    obj.extract()
}

/// A durable corpus in a data directory: documents with str ids and fingerprints, each
/// optionally with a time to live, queried for near-duplicates within the distance it was
/// made with. Every write is on disk (one transaction, fsync) before it returns; the
/// tables live in memory and are rebuilt by `FingerprintStore.open`.
///
/// Make one with `FingerprintStore.create(path, distance=3, blocks="auto", fingerprint_version=2,
/// expected=0)` (`fingerprint_version` records what made the fingerprints, by default
/// neardup's format version; `blocks="auto"` picks the layout for about `expected`
/// documents), open it again with `FingerprintStore.open(path)`. Only one `FingerprintStore` may hold a directory
/// at a time: `close()` it (or use `with`) before opening it again. Queries never wait
/// for a write in progress; `reader()` gives threads that only query a `FingerprintStoreReader`.
///
/// Errors about the directory raise `neardup.StoreError` or a subclass:
/// `NotAStoreError` (also a `FileNotFoundError`) when there is no store at the path,
/// `StoreExistsError` (also a `FileExistsError`) when `create` finds one,
/// `ForeignStoreError` (also a `ValueError`) when the file is not a neardup store or of
/// another format; a bad layout raises ValueError.
///
/// >>> import neardup, tempfile, os
/// >>> path = os.path.join(tempfile.mkdtemp(), "store")
/// >>> with neardup.FingerprintStore.create(path, distance=3) as s:
/// ...     s.insert("a", 0b1111)
/// ...     s.insert_bulk([("b", 0b0111), ("c", 1 << 40, 3600)])
/// >>> with neardup.FingerprintStore.open(path) as s:
/// ...     s.find_all(0b1111), len(s)
/// ([('a', 0), ('b', 1)], 3)
#[pyclass(frozen, module = "neardup", name = "FingerprintStore")]
pub struct FingerprintStore {
    /// `None` once closed.
    store: Mutex<Option<neardup_store::FingerprintStore>>,
    /// Queries go through a reader, so they never wait for a write.
    reader: Mutex<Option<FingerprintReader>>,
    path: PathBuf,
    config: StoreConfig,
}

/// The lock of `m`; a poisoned lock means a panic in a call, reported rather than reused.
fn lock<T>(m: &Mutex<T>) -> PyResult<MutexGuard<'_, T>> {
    m.lock().map_err(|_| {
        PyRuntimeError::new_err(
            "this FingerprintStore is unusable: an earlier call failed in the middle",
        )
    })
}

fn closed() -> PyErr {
    PyValueError::new_err("this FingerprintStore is closed")
}

impl FingerprintStore {
    fn wrap(store: neardup_store::FingerprintStore, path: PathBuf) -> FingerprintStore {
        FingerprintStore {
            reader: Mutex::new(Some(store.reader())),
            config: store.config(),
            store: Mutex::new(Some(store)),
            path,
        }
    }

    /// Runs `f` on the store with the GIL released (a thread waiting for the lock never
    /// holds the GIL).
    fn write<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut neardup_store::FingerprintStore) -> neardup_store::Result<R> + Send,
    ) -> PyResult<R> {
        enum Failure {
            Lock(PyErr),
            Store(StoreError),
        }
        let result = py.detach(|| {
            let mut guard = lock(&self.store).map_err(Failure::Lock)?;
            let store = guard.as_mut().ok_or_else(|| Failure::Lock(closed()))?;
            f(store).map_err(Failure::Store)
        });
        result.map_err(|e| match e {
            Failure::Lock(e) => e,
            Failure::Store(e) => store_error(py, e),
        })
    }

    /// A query handle, taken under the lock for a moment only.
    fn handle(&self) -> PyResult<FingerprintReader> {
        lock(&self.reader)?.clone().ok_or_else(closed)
    }

    /// `find_first` on the latest state, with the GIL released.
    fn first(&self, py: Python<'_>, fp: &Bound<'_, PyAny>) -> PyResult<Option<(String, u32)>> {
        let (fp, reader) = (fingerprint(fp)?, self.handle()?);
        py.detach(move || reader.find_first(fp))
            .map_err(|e| store_error(py, e))
    }

    /// `find_all` on the latest state, with the GIL released.
    fn all(&self, py: Python<'_>, fp: &Bound<'_, PyAny>) -> PyResult<Vec<(String, u32)>> {
        let (fp, reader) = (fingerprint(fp)?, self.handle()?);
        py.detach(move || reader.find_all(fp))
            .map_err(|e| store_error(py, e))
    }

    /// Documents stored; 0 once closed.
    fn len(&self) -> PyResult<usize> {
        Ok(lock(&self.reader)?
            .as_ref()
            .map_or(0, FingerprintReader::len))
    }
}

#[pymethods]
impl FingerprintStore {
    /// Deprecated (a `DeprecationWarning`): `DocumentStore.connect`, which it calls. It
    /// opens the document corpus under `namespace` in the Redis Cluster of `urls`, a
    /// `DocumentStore` of texts, not a fingerprint store.
    #[staticmethod]
    #[pyo3(signature = (urls, namespace = "neardup", create = false, threshold = 0.8, paragraphs = false, expected = None, replicas = 1))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        py: Python<'_>,
        urls: &str,
        namespace: &str,
        create: bool,
        threshold: f64,
        paragraphs: bool,
        expected: Option<&Bound<'_, PyAny>>,
        replicas: u32,
    ) -> PyResult<crate::documents::DocumentStore> {
        PyErr::warn(
            py,
            &py.get_type::<pyo3::exceptions::PyDeprecationWarning>(),
            c"FingerprintStore.connect opens a document store: use DocumentStore.connect",
            1,
        )?;
        crate::documents::connect(
            py, urls, namespace, create, threshold, paragraphs, expected, replicas,
        )
    }

    /// Makes a new store in the directory `path` (created if missing).
    #[staticmethod]
    #[pyo3(signature = (path, distance = None, blocks = None, fingerprint_version = None, expected = None))]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        distance: Option<&Bound<'_, PyAny>>,
        blocks: Option<&Bound<'_, PyAny>>,
        fingerprint_version: Option<u32>,
        expected: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<FingerprintStore> {
        let config = StoreConfig {
            distance: distance.map_or(Ok(3), |d| distance_arg(d, 64))?,
            blocks: blocks.map_or(Ok(Blocks::Auto), blocks_arg)?,
            fingerprint_version: fingerprint_version.unwrap_or(neardup::fingerprint::VERSION),
        };
        let expected = expected.map_or(Ok(0), |e| size_arg(e, "expected"))?;
        let dir = path.clone();
        let store = py
            .detach(move || neardup_store::FingerprintStore::create(&dir, config, expected))
            .map_err(|e| store_error(py, e))?;
        Ok(FingerprintStore::wrap(store, path))
    }

    /// Opens the store in the directory `path` and rebuilds its tables. Each of
    /// `distance`, `blocks` and `fingerprint_version` that is given must be what the store
    /// was made with (`ForeignStoreError` otherwise), so that a program never queries a
    /// store with settings it does not expect.
    #[staticmethod]
    #[pyo3(signature = (path, distance = None, blocks = None, fingerprint_version = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        distance: Option<&Bound<'_, PyAny>>,
        blocks: Option<&Bound<'_, PyAny>>,
        fingerprint_version: Option<u32>,
    ) -> PyResult<FingerprintStore> {
        let distance = distance.map(|d| distance_arg(d, 64)).transpose()?;
        let blocks = blocks.map(blocks_arg).transpose()?;
        let dir = path.clone();
        let store = py
            .detach(move || neardup_store::FingerprintStore::open(&dir, None))
            .map_err(|e| store_error(py, e))?;
        let stored = store.config();
        let mut wrong = Vec::new();
        if let Some(d) = distance.filter(|&d| d != stored.distance) {
            wrong.push(format!("distance {} (asked for {d})", stored.distance));
        }
        if let Some(b) = blocks.filter(|&b| b != Blocks::Auto && b != stored.blocks) {
            wrong.push(format!("blocks {} (asked for {b})", stored.blocks));
        }
        if let Some(v) = fingerprint_version.filter(|&v| v != stored.fingerprint_version) {
            wrong.push(format!(
                "fingerprint version {} (asked for {v})",
                stored.fingerprint_version
            ));
        }
        if !wrong.is_empty() {
            return Err(store_error(
                py,
                StoreError::Foreign {
                    path: path.join(neardup_store::FILE),
                    detail: format!("made with {}", wrong.join(", ")),
                },
            ));
        }
        Ok(FingerprintStore::wrap(store, path))
    }

    /// Stores `id` (a str) with fingerprint `fp`, expiring after `ttl` seconds if given (0:
    /// expired at once); returns the fingerprint it replaced, or None.
    #[pyo3(signature = (id, fp, ttl = None))]
    fn insert(
        &self,
        py: Python<'_>,
        id: &Bound<'_, PyAny>,
        fp: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<u64>> {
        let (id, fp, ttl) = (str_id(id)?, fingerprint(fp)?, ttl_arg(ttl)?);
        self.write(py, move |s| s.insert(&id, fp, ttl))
    }

    /// Stores every document of `docs`, an iterable of `(id, fp)` or `(id, fp, ttl)`
    /// tuples, in one transaction (a later copy of an id wins); `ttl` applies to those
    /// without their own. All or nothing.
    #[pyo3(signature = (docs, ttl = None))]
    fn insert_bulk(
        &self,
        py: Python<'_>,
        docs: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let default_ttl = ttl_arg(ttl)?;
        let iter = docs.try_iter().map_err(|_| {
            PyTypeError::new_err(format!(
                "docs must be an iterable of (id, fp) or (id, fp, ttl) tuples, got {}",
                type_name(docs)
            ))
        })?;
        let mut rows: Vec<(PyBackedStr, u64, Option<Duration>)> = Vec::new();
        for (i, item) in iter.enumerate() {
            let item = item?;
            let tuple = item
                .cast::<PyTuple>()
                .ok()
                .filter(|t| t.len() == 2 || t.len() == 3);
            let Some(t) = tuple else {
                return Err(PyTypeError::new_err(format!(
                    "docs[{i}] must be an (id, fp) or (id, fp, ttl) tuple, got {}",
                    type_name(&item)
                )));
            };
            let ttl = if t.len() == 3 {
                ttl_arg(Some(&t.get_item(2)?))?
            } else {
                default_ttl
            };
            rows.push((str_id(&t.get_item(0)?)?, fingerprint(&t.get_item(1)?)?, ttl));
        }
        self.write(py, move |s| {
            let docs: Vec<(&str, u64, Option<Duration>)> = rows
                .iter()
                .map(|(id, fp, ttl)| (&**id, *fp, *ttl))
                .collect();
            s.insert_bulk(&docs, |_| {})
        })
    }

    /// Removes `id`; returns whether it was stored.
    fn remove(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = str_id(id)?;
        self.write(py, move |s| s.remove(&id))
    }

    /// Removes every id of `ids` (an iterable of str) in one transaction; returns how many
    /// were stored.
    fn remove_bulk(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<usize> {
        if ids.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "ids must be an iterable of str, not a str (wrap it in a list)",
            ));
        }
        let ids: Vec<PyBackedStr> = ids
            .try_iter()?
            .map(|i| str_id(&i?))
            .collect::<PyResult<_>>()?;
        self.write(py, move |s| {
            let ids: Vec<&str> = ids.iter().map(|i| &**i).collect();
            s.remove_bulk(&ids)
        })
    }

    /// The nearest live document within the distance of `fp` as `(id, distance)` (the
    /// smallest id among equally near ones), or None.
    fn find_first(&self, py: Python<'_>, fp: &Bound<'_, PyAny>) -> PyResult<Option<(String, u32)>> {
        self.first(py, fp)
    }

    /// Every live document within the distance of `fp`, as `(id, distance)`, nearest
    /// first, then by id.
    fn find_all(&self, py: Python<'_>, fp: &Bound<'_, PyAny>) -> PyResult<Vec<(String, u32)>> {
        self.all(py, fp)
    }

    /// A query-only handle on this store (`FingerprintStoreReader`), to give to threads that search
    /// while this one writes.
    fn reader(slf: Bound<'_, Self>) -> Reader {
        Reader {
            store: slf.unbind(),
        }
    }

    /// Bytes of memory the store's in-memory tables hold (the data on disk not counted),
    /// to size a process by.
    fn heap_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        self.write(py, |s| Ok(s.heap_bytes()))
    }

    /// Deletes every expired document; returns how many.
    fn sweep(&self, py: Python<'_>) -> PyResult<usize> {
        self.write(py, |s| s.sweep())
    }

    /// Every stored `(id, fingerprint)`, by id (expired ones until swept).
    fn documents(&self, py: Python<'_>) -> PyResult<Vec<(String, u64)>> {
        self.write(py, |s| s.documents())
    }

    /// Closes the store, releasing its directory; any later call raises ValueError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let reader = lock(&self.reader)?.take();
        let store = lock(&self.store)?.take();
        // Dropping the database may flush: without the GIL.
        py.detach(move || drop((reader, store)));
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// The data directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The largest distance matched.
    #[getter]
    fn distance(&self) -> u32 {
        self.config.distance
    }

    /// Blocks per fingerprint, as fixed when the store was made.
    #[getter]
    fn blocks(&self) -> usize {
        match self.config.blocks {
            Blocks::Fixed(b) => b,
            Blocks::Auto => 0,
        }
    }

    /// The fingerprint version the store was made with.
    #[getter]
    fn fingerprint_version(&self) -> u32 {
        self.config.fingerprint_version
    }

    /// Documents stored (expired ones until swept); 0 once closed.
    fn __len__(&self) -> PyResult<usize> {
        self.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "FingerprintStore('{}', distance={}, blocks={}, fingerprint_version={})",
            self.path.display(),
            self.config.distance,
            self.blocks(),
            self.config.fingerprint_version
        )
    }
}

/// Queries on a `FingerprintStore` for other threads, made by `FingerprintStore.reader()`: its `find_first` and
/// `find_all` (same arguments, same results), and `len()`, but nothing that writes. As the
/// FingerprintStore's own queries do, they see every write that has returned, never wait for one in
/// progress, and run with the GIL released, so threads querying readers run in parallel
/// with each other and with the thread that writes.
///
/// A reader keeps its `FingerprintStore` object alive, but not open: once the FingerprintStore is closed
/// (`close()`, or the end of its `with` block), the reader's queries raise ValueError, as
/// the FingerprintStore's do, and its `len()` is 0. Opening the directory again needs a new reader.
///
/// >>> import neardup, tempfile, os, threading
/// >>> store = neardup.FingerprintStore.create(os.path.join(tempfile.mkdtemp(), "store"), distance=3)
/// >>> reader = store.reader()
/// >>> store.insert("a", 0b1111)
/// >>> found = []
/// >>> t = threading.Thread(target=lambda: found.append(reader.find_all(0b0111)))
/// >>> t.start(); t.join()
/// >>> found, reader.find_first(1 << 40), len(reader)
/// ([[('a', 1)]], None, 1)
/// >>> store.close()
/// >>> reader.find_all(0b1111)
/// Traceback (most recent call last):
///   ...
/// ValueError: this FingerprintStore is closed
#[pyclass(frozen, module = "neardup", name = "FingerprintStoreReader")]
pub struct Reader {
    store: Py<FingerprintStore>,
}

#[pymethods]
impl Reader {
    /// As `FingerprintStore.find_first`: the nearest live document within the distance of `fp` as
    /// `(id, distance)`, or None.
    fn find_first(&self, py: Python<'_>, fp: &Bound<'_, PyAny>) -> PyResult<Option<(String, u32)>> {
        self.store.get().first(py, fp)
    }

    /// As `FingerprintStore.find_all`: every live document within the distance of `fp`, as
    /// `(id, distance)`, nearest first, then by id.
    fn find_all(&self, py: Python<'_>, fp: &Bound<'_, PyAny>) -> PyResult<Vec<(String, u32)>> {
        self.store.get().all(py, fp)
    }

    /// Documents stored (expired ones until swept); 0 once the FingerprintStore is closed.
    fn __len__(&self) -> PyResult<usize> {
        self.store.get().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "FingerprintStoreReader('{}')",
            self.store.get().path.display()
        )
    }
}

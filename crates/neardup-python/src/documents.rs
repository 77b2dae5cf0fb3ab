//! `DocumentStore`: the document corpus of `neardup serve`, either embedded in a data
//! directory (`neardup_store::DocumentStore`, as `neardup serve --data DIR` keeps it) or in a
//! Redis Cluster (`neardup_store::RedisStore`, reached with `DocumentStore.connect(urls)`). Both
//! backends decide matches alike (`neardup_store::Backend`), so the Python methods are
//! written once over an enum of the two.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

use neardup::decide::Signature;
use neardup::jaccard::Threshold;
use neardup_store::{
    Backend, BackendReader, Checked, DocConfig, DocumentReader, Hit, Outcome, Prepared, Preparer,
    RedisOptions, RedisReader, RedisStore, StoreError, StoredDoc, Write,
};
use rayon::prelude::*;

use crate::convert::{size_arg, store_error, ttl_arg, type_name};

/// The writer of either backend. One per DocumentStore, under its mutex: both are large
/// and unlike in size, so both are boxed (one allocation per store).
enum Writer {
    Local(Box<neardup_store::DocumentStore>),
    Redis(Box<RedisStore>),
}

impl Writer {
    fn apply(&mut self, writes: Vec<Write>) -> neardup_store::Result<Vec<Outcome>> {
        match self {
            Writer::Local(s) => Backend::apply(&mut **s, writes),
            Writer::Redis(s) => Backend::apply(&mut **s, writes),
        }
    }

    fn sweep(&mut self) -> neardup_store::Result<usize> {
        match self {
            Writer::Local(s) => Backend::sweep(&mut **s),
            Writer::Redis(s) => Backend::sweep(&mut **s),
        }
    }

    fn reader(&self) -> Reader {
        match self {
            Writer::Local(s) => Reader::Local(Backend::reader(&**s)),
            Writer::Redis(s) => Reader::Redis(Backend::reader(&**s)),
        }
    }
}

/// The reader of either backend: cheap to clone, never waiting for the writer.
#[derive(Clone)]
enum Reader {
    Local(DocumentReader),
    Redis(RedisReader),
}

impl Reader {
    fn check_text(&self, preparer: &Preparer, text: &str) -> neardup_store::Result<Checked> {
        match self {
            Reader::Local(r) => r.check_text(preparer, text),
            Reader::Redis(r) => r.check_text(preparer, text),
        }
    }

    fn get(&self, id: &str) -> neardup_store::Result<Option<StoredDoc>> {
        match self {
            Reader::Local(r) => BackendReader::get(r, id),
            Reader::Redis(r) => BackendReader::get(r, id),
        }
    }

    fn len(&self) -> usize {
        match self {
            Reader::Local(r) => BackendReader::len(r),
            Reader::Redis(r) => BackendReader::len(r),
        }
    }

    fn check(&self, doc: &Prepared) -> neardup_store::Result<Checked> {
        match self {
            Reader::Local(r) => BackendReader::check(r, doc),
            Reader::Redis(r) => BackendReader::check(r, doc),
        }
    }
}

/// Where the corpus is, for `path`, `namespace` and `repr`.
enum Place {
    Dir(PathBuf),
    Namespace(String),
}

/// A document corpus as `neardup serve` keeps it: texts in, their stored near-duplicates
/// (estimated Jaccard similarity of word 5-shingle sets at or above the corpus's
/// threshold, as `neardup.dedup(records, threshold=...)` decides) out, decided as
/// `neardup serve` decides.
///
/// `DocumentStore.create(path, threshold=0.8, paragraphs=False)` makes one in the data
/// directory `path` (created if missing), `DocumentStore.open(path)` opens one there: the
/// files `neardup serve --data DIR` makes and serves. Only one process may hold a
/// directory at a time: `close()` it (or use `with`) before `neardup serve` opens it.
/// Every write is on disk (one transaction, fsync) before it returns.
///
/// `Store.connect(urls, namespace="neardup", create=False, threshold=0.8,
/// paragraphs=False, expected=1000000, replicas=1)` (or `DocumentStore.connect`) reaches
/// one in a Redis Cluster instead, shared by any number of processes and `neardup serve
/// --redis` instances: `urls` the seed nodes, comma-separated (`redis://host:port` or
/// `host:port`); with `create`, a new corpus is made under `namespace` with `threshold`,
/// `paragraphs` and `expected` (documents expected: how finely its bands are split into
/// buckets). A write returns once `replicas` replicas of each primary have it.
///
/// Errors about the store raise `neardup.StoreError` or a subclass, naming the path or
/// the cluster: `NotAStoreError` (also a `FileNotFoundError`) when there is no store at
/// the path, `StoreExistsError` (also a `FileExistsError`) when `create` finds one,
/// `ForeignStoreError` (also a `ValueError`) for a file that is not a document store (a
/// `Store`'s fingerprint store, say).
///
/// >>> import neardup, tempfile, os
/// >>> path = os.path.join(tempfile.mkdtemp(), "docs")
/// >>> text = " ".join(f"the fox number {i} jumps over the lazy dog" for i in range(20))
/// >>> with neardup.DocumentStore.create(path, threshold=0.8) as store:
/// ...     store.put("a", text)["inserted"]
/// ...     store.put("b", text + " again", only_if_unique=True)["inserted"]
/// True
/// False
/// >>> with neardup.DocumentStore.open(path) as store:
/// ...     [id for id, similarity in store.check(text)], len(store)
/// (['a'], 1)
#[pyclass(frozen, module = "neardup", name = "DocumentStore")]
pub struct DocumentStore {
    /// The writer, `None` once closed. Writes take turns: the embedded store has one
    /// writer, and a Redis `WAIT` blocks its connection.
    store: Mutex<Option<Writer>>,
    /// Checks go through a reader, never waiting for writes; `None` once closed.
    reader: Mutex<Option<Reader>>,
    preparer: Preparer,
    config: DocConfig,
    place: Place,
}

fn doc_id(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if !obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "a document id must be a str, got {}",
            type_name(obj)
        )));
    }
    obj.extract()
}

fn text_arg(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if !obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "a text must be a str, got {}",
            type_name(obj)
        )));
    }
    obj.extract()
}

fn hits(h: Vec<Hit>) -> Vec<(String, f32)> {
    h.into_iter().map(|h| (h.id, h.similarity)).collect()
}

/// The lock of `m`; a poisoned lock means a panic in a write, reported rather than reused.
fn lock<T>(m: &Mutex<T>) -> PyResult<MutexGuard<'_, T>> {
    m.lock().map_err(|_| {
        PyRuntimeError::new_err(
            "this DocumentStore is unusable: an earlier write failed in the middle",
        )
    })
}

fn closed() -> PyErr {
    PyValueError::new_err("this DocumentStore is closed")
}

fn threshold_arg(threshold: f64) -> PyResult<Threshold> {
    Threshold::new(threshold).map_err(|e| PyValueError::new_err(e.to_string()))
}

impl DocumentStore {
    fn wrap(store: Writer, place: Place) -> DocumentStore {
        let reader = store.reader();
        let config = match &store {
            Writer::Local(s) => Backend::config(&**s),
            Writer::Redis(s) => Backend::config(&**s),
        };
        DocumentStore {
            reader: Mutex::new(Some(reader)),
            preparer: Preparer::new(config),
            config,
            place,
            store: Mutex::new(Some(store)),
        }
    }

    /// Runs `f` on the writer with the GIL released (a thread waiting for the lock never
    /// holds the GIL).
    fn write<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Writer) -> neardup_store::Result<R> + Send,
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

    /// Applies `writes` with the GIL released.
    fn apply(&self, py: Python<'_>, writes: Vec<Write>) -> PyResult<Vec<Outcome>> {
        self.write(py, move |s| s.apply(writes))
    }

    /// A query handle, taken under the lock for a moment only.
    fn handle(&self) -> PyResult<Reader> {
        lock(&self.reader)?.clone().ok_or_else(closed)
    }

    /// The threshold the store decides at.
    pub(crate) fn decides_at(&self) -> Threshold {
        self.config.threshold
    }

    /// For `neardup.dedup(..., against=store)`: each signature's most similar stored
    /// near-duplicate, as (id, similarity, distance), looked up in parallel with the GIL
    /// released.
    pub(crate) fn most_similar(
        &self,
        py: Python<'_>,
        sigs: &[Signature],
    ) -> PyResult<Vec<Option<Hit>>> {
        let (reader, preparer) = (self.handle()?, self.preparer.clone());
        py.detach(|| {
            sigs.par_iter()
                .map(|s| {
                    let checked = reader.check(&preparer.from_signature(*s))?;
                    Ok(checked.hits.into_iter().next())
                })
                .collect::<neardup_store::Result<Vec<_>>>()
        })
        .map_err(|e| store_error(py, e))
    }

    /// Which of `ids` are stored.
    pub(crate) fn stored(&self, py: Python<'_>, ids: &[String]) -> PyResult<Vec<bool>> {
        let reader = self.handle()?;
        py.detach(|| {
            ids.par_iter()
                .map(|id| Ok(reader.get(id)?.is_some()))
                .collect::<neardup_store::Result<Vec<bool>>>()
        })
        .map_err(|e| store_error(py, e))
    }

    /// For `neardup.dedup(..., save=True)`: puts every `(id, text)`, each only if unique,
    /// in batches of 1,000 (each durable before the next); how many were stored.
    pub(crate) fn put_unique(&self, py: Python<'_>, docs: Vec<(String, &str)>) -> PyResult<usize> {
        let mut stored = 0;
        for batch in docs.chunks(1_000) {
            let preparer = self.preparer.clone();
            let writes: Vec<Write> = py.detach(|| {
                batch
                    .par_iter()
                    .map(|(id, text)| Write::Put {
                        id: id.clone(),
                        doc: Box::new(preparer.prepare(text, false)),
                        ttl: None,
                        only_if_unique: true,
                    })
                    .collect()
            });
            let done = self.apply(py, writes)?;
            stored += done
                .iter()
                .filter(|o| matches!(o, Outcome::Put { inserted: true, .. }))
                .count();
        }
        Ok(stored)
    }
}

/// `DocumentStore.connect` (and the deprecated `FingerprintStore.connect`).
#[allow(clippy::too_many_arguments)]
pub fn connect(
    py: Python<'_>,
    urls: &str,
    namespace: &str,
    create: bool,
    threshold: f64,
    paragraphs: bool,
    expected: Option<&Bound<'_, PyAny>>,
    replicas: u32,
) -> PyResult<DocumentStore> {
    let threshold = threshold_arg(threshold)?;
    let expected = expected.map_or(Ok(1_000_000), |e| size_arg(e, "expected"))? as u64;
    let options = RedisOptions {
        namespace: namespace.to_string(),
        wait_replicas: replicas,
        ..RedisOptions::default()
    };
    let config = DocConfig {
        threshold,
        paragraphs,
    };
    let urls = urls.to_string();
    let store = py
        .detach(move || -> Result<RedisStore, StoreError> {
            if create {
                RedisStore::create(&urls, options, config, expected)
            } else {
                RedisStore::connect(&urls, options, None)
            }
        })
        .map_err(|e| store_error(py, e))?;
    Ok(DocumentStore::wrap(
        Writer::Redis(Box::new(store)),
        Place::Namespace(namespace.to_string()),
    ))
}

#[pymethods]
impl DocumentStore {
    /// Makes a new document store in the data directory `path` (created if missing), as
    /// `neardup serve --data path --create --threshold T [--paragraphs]` does.
    #[staticmethod]
    #[pyo3(signature = (path, threshold = 0.8, paragraphs = false))]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        threshold: f64,
        paragraphs: bool,
    ) -> PyResult<DocumentStore> {
        let config = DocConfig {
            threshold: threshold_arg(threshold)?,
            paragraphs,
        };
        let dir = path.clone();
        let store = py
            .detach(move || neardup_store::DocumentStore::create(&dir, config))
            .map_err(|e| store_error(py, e))?;
        Ok(DocumentStore::wrap(
            Writer::Local(Box::new(store)),
            Place::Dir(path),
        ))
    }

    /// Opens the document store in the data directory `path` (one `create` or `neardup
    /// serve --data path --create` made) and rebuilds its index, with the threshold and
    /// paragraphs setting it was made with.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<DocumentStore> {
        let dir = path.clone();
        let store = py
            .detach(move || neardup_store::DocumentStore::open(&dir, None))
            .map_err(|e| store_error(py, e))?;
        Ok(DocumentStore::wrap(
            Writer::Local(Box::new(store)),
            Place::Dir(path),
        ))
    }

    /// Opens (with `create`, makes) the corpus under `namespace` in the cluster of `urls`.
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
    ) -> PyResult<DocumentStore> {
        connect(
            py, urls, namespace, create, threshold, paragraphs, expected, replicas,
        )
    }

    /// Stores `text` under `id` (replacing what `id` held), expiring after `ttl` seconds if
    /// given; with `only_if_unique`, only if no near-duplicate is stored. Returns a dict:
    /// `inserted`, `replaced`, and `matches`, the stored near-duplicates as (id,
    /// similarity), most similar first.
    #[pyo3(signature = (id, text, ttl = None, only_if_unique = false))]
    fn put<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
        text: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        only_if_unique: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (id, text, ttl) = (doc_id(id)?, text_arg(text)?, ttl_arg(ttl)?);
        let preparer = self.preparer.clone();
        let doc = py.detach(move || preparer.prepare(&text, false));
        let write = Write::Put {
            id,
            doc: Box::new(doc),
            ttl,
            only_if_unique,
        };
        let out = PyDict::new(py);
        if let Some(Outcome::Put {
            inserted,
            replaced,
            matches,
            partial,
            ..
        }) = self.apply(py, vec![write])?.pop()
        {
            out.set_item("inserted", inserted)?;
            out.set_item("replaced", replaced)?;
            out.set_item("matches", hits(matches))?;
            // As the service answers: only when near-duplicates may be missing.
            if partial {
                out.set_item("partial", true)?;
            }
        }
        Ok(out)
    }

    /// Stores every `(id, text)` of `docs` (an iterable), expiring after `ttl` seconds if
    /// given, in batches of 1,000 (each durable, or acknowledged by the replicas, before
    /// the next); returns how many.
    #[pyo3(signature = (docs, ttl = None))]
    fn put_many(
        &self,
        py: Python<'_>,
        docs: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let ttl: Option<Duration> = ttl_arg(ttl)?;
        let iter = docs.try_iter().map_err(|_| {
            PyTypeError::new_err(format!(
                "docs must be an iterable of (id, text) tuples, got {}",
                type_name(docs)
            ))
        })?;
        let mut batch: Vec<(String, String)> = Vec::new();
        let mut count = 0;
        let mut flush = |batch: Vec<(String, String)>| -> PyResult<()> {
            let preparer = self.preparer.clone();
            let writes: Vec<Write> = py.detach(move || {
                batch
                    .into_iter()
                    .map(|(id, text)| Write::Put {
                        id,
                        doc: Box::new(preparer.prepare(&text, false)),
                        ttl,
                        only_if_unique: false,
                    })
                    .collect()
            });
            count += writes.len();
            self.apply(py, writes).map(|_| ())
        };
        for item in iter {
            let item = item?;
            let (id, text): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                item.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "put_many takes (id, text) tuples, got {}",
                        type_name(&item)
                    ))
                })?;
            batch.push((doc_id(&id)?, text_arg(&text)?));
            if batch.len() == 1_000 {
                flush(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            flush(batch)?;
        }
        Ok(count)
    }

    /// For `neardup.ray.dedup(..., save=True)`: which of `ids` are stored.
    #[pyo3(name = "_stored")]
    fn stored_ids(&self, py: Python<'_>, ids: Vec<String>) -> PyResult<Vec<bool>> {
        self.stored(py, &ids)
    }

    /// For `neardup.ray.dedup(..., save=True)`: puts every `(id, text)`, each only if
    /// unique, in batches of 1,000 (each durable before the next); how many were stored.
    #[pyo3(name = "_put_unique")]
    fn put_unique_pairs(&self, py: Python<'_>, docs: Vec<(String, String)>) -> PyResult<usize> {
        self.put_unique(
            py,
            docs.iter()
                .map(|(id, text)| (id.clone(), text.as_str()))
                .collect(),
        )
    }

    /// The stored near-duplicates of `text` as (id, similarity), most similar first: a
    /// `neardup.Matches`, a list whose `partial` says whether a crowded band key cut them.
    fn check<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let text = text_arg(text)?;
        let (reader, preparer) = (self.handle()?, self.preparer.clone());
        let checked = py
            .detach(move || reader.check_text(&preparer, &text))
            .map_err(|e| store_error(py, e))?;
        // Looked up once, not on every check.
        static MATCHES: PyOnceLock<Py<PyType>> = PyOnceLock::new();
        let matches = MATCHES
            .import(py, "neardup._matches", "Matches")?
            .call1((hits(checked.hits),))?;
        matches.setattr("partial", checked.partial)?;
        Ok(matches)
    }

    /// Removes `id`; whether it was stored.
    fn delete(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = doc_id(id)?;
        let out = self.apply(py, vec![Write::Delete { id }])?;
        Ok(matches!(
            out.first(),
            Some(Outcome::Delete { removed: true })
        ))
    }

    /// Deletes the expired documents; how many.
    fn sweep(&self, py: Python<'_>) -> PyResult<usize> {
        self.write(py, |s| s.sweep())
    }

    /// Closes the store (for a data directory, releasing it, so that `neardup serve` or
    /// another `open` can take it); any later call raises ValueError.
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

    fn __contains__(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (id, reader) = (doc_id(id)?, self.handle()?);
        py.detach(move || reader.get(&id))
            .map(|d| d.is_some())
            .map_err(|e| store_error(py, e))
    }

    /// Documents stored (expired ones until swept); 0 once closed.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let Some(reader) = lock(&self.reader)?.clone() else {
            return Ok(0);
        };
        // Redis counts with a round trip: without the GIL.
        Ok(py.detach(move || reader.len()))
    }

    /// The corpus's threshold.
    #[getter]
    fn threshold(&self) -> f64 {
        self.config.threshold.get()
    }

    /// Whether paragraphs are indexed too.
    #[getter]
    fn paragraphs(&self) -> bool {
        self.config.paragraphs
    }

    /// The data directory of an embedded store; None for one in Redis.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        match &self.place {
            Place::Dir(p) => Some(p.clone()),
            Place::Namespace(_) => None,
        }
    }

    /// The corpus's key prefix in a Redis Cluster; None for an embedded store.
    #[getter]
    fn namespace(&self) -> Option<&str> {
        match &self.place {
            Place::Dir(_) => None,
            Place::Namespace(n) => Some(n),
        }
    }

    fn __repr__(&self) -> String {
        match &self.place {
            Place::Dir(p) => format!(
                "DocumentStore('{}', threshold={}, paragraphs={})",
                p.display(),
                self.config.threshold,
                if self.config.paragraphs {
                    "True"
                } else {
                    "False"
                }
            ),
            Place::Namespace(n) => format!(
                "DocumentStore(namespace={n:?}, threshold={})",
                self.config.threshold
            ),
        }
    }
}

//! `DocumentStore`: the document corpus of `neardup serve` kept in a Redis Cluster
//! (`neardup_store::RedisStore`), reached with `Store.connect(urls)`.

use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use neardup::jaccard::Threshold;
use neardup_store::{
    DocConfig, Hit, Outcome, Preparer, RedisOptions, RedisReader, RedisStore, StoreError, Write,
};

use crate::convert::{size_arg, type_name};
use crate::store::{store_error, ttl_arg};

/// A document corpus in a Redis Cluster, shared by any number of processes and
/// `neardup serve` instances: texts in, their stored near-duplicates (estimated Jaccard
/// similarity of word 5-shingle sets at or above the corpus's threshold) out, decided as
/// `neardup serve` decides.
///
/// `Store.connect(urls, namespace="neardup", create=False, threshold=0.8,
/// paragraphs=False, expected=1000000, replicas=1)`: `urls` the seed nodes,
/// comma-separated (`redis://host:port` or `host:port`); with `create`, a new corpus is
/// made under `namespace` with `threshold`, `paragraphs` and `expected` (documents
/// expected: how finely its bands are split into buckets). A write returns once `replicas`
/// replicas of each primary have it. Cluster errors raise `neardup.StoreError`.
#[pyclass(frozen, module = "neardup", name = "DocumentStore")]
pub struct DocumentStore {
    /// The writer; `WAIT` blocks its connection, so writes take turns.
    store: Mutex<RedisStore>,
    /// Checks go through a reader (its own pooled connections), never waiting for writes.
    reader: RedisReader,
    preparer: Preparer,
    namespace: String,
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

impl DocumentStore {
    /// Applies `writes` with the GIL released.
    fn apply(&self, py: Python<'_>, writes: Vec<Write>) -> PyResult<Vec<Outcome>> {
        let result = py.detach(|| match self.store.lock() {
            Ok(mut store) => store.apply(writes).map_err(Some),
            Err(_) => Err(None),
        });
        result.map_err(|e| match e {
            Some(e) => store_error(py, e),
            None => PyRuntimeError::new_err(
                "this DocumentStore is unusable: an earlier write failed in the middle",
            ),
        })
    }
}

/// `Store.connect` and `DocumentStore.connect`.
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
    let threshold = Threshold::new(threshold).map_err(|e| PyValueError::new_err(e.to_string()))?;
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
    Ok(DocumentStore {
        reader: store.reader(),
        preparer: Preparer::new(store.config()),
        namespace: namespace.to_string(),
        store: Mutex::new(store),
    })
}

#[pymethods]
impl DocumentStore {
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
        }) = self.apply(py, vec![write])?.pop()
        {
            out.set_item("inserted", inserted)?;
            out.set_item("replaced", replaced)?;
            out.set_item("matches", hits(matches))?;
        }
        Ok(out)
    }

    /// Stores every `(id, text)` of `docs` (an iterable), expiring after `ttl` seconds if
    /// given, in batches of 1,000 (each acknowledged by the replicas before the next);
    /// returns how many.
    #[pyo3(signature = (docs, ttl = None))]
    fn put_many(
        &self,
        py: Python<'_>,
        docs: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let ttl: Option<Duration> = ttl_arg(ttl)?;
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
        for item in docs.try_iter()? {
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

    /// The stored near-duplicates of `text` as (id, similarity), most similar first.
    fn check(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<(String, f32)>> {
        let text = text_arg(text)?;
        let (reader, preparer) = (self.reader.clone(), self.preparer.clone());
        py.detach(move || reader.check_text(&preparer, &text))
            .map(hits)
            .map_err(|e| store_error(py, e))
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
        let result = py.detach(|| match self.store.lock() {
            Ok(mut store) => store.sweep().map_err(Some),
            Err(_) => Err(None),
        });
        result.map_err(|e| match e {
            Some(e) => store_error(py, e),
            None => PyRuntimeError::new_err("this DocumentStore is unusable"),
        })
    }

    fn __contains__(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = doc_id(id)?;
        let reader = self.reader.clone();
        py.detach(move || reader.get(&id))
            .map(|d| d.is_some())
            .map_err(|e| store_error(py, e))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        let reader = self.reader.clone();
        py.detach(move || reader.len())
    }

    /// The corpus's threshold.
    #[getter]
    fn threshold(&self) -> f64 {
        self.reader.config().threshold.get()
    }

    /// The corpus's key prefix in the cluster.
    #[getter]
    fn namespace(&self) -> &str {
        &self.namespace
    }

    fn __repr__(&self) -> String {
        format!(
            "DocumentStore(namespace={:?}, threshold={})",
            self.namespace,
            self.reader.config().threshold
        )
    }
}

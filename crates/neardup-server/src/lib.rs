//! # neardup-server
//!
//! The HTTP service: "have we seen this document, or its paragraphs, before?" answered
//! in a few hundred microseconds over a [`DocumentStore`], with the same decision as `neardup
//! dedup` (estimated Jaccard similarity of word 5-shingle sets at the store's threshold).
//!
//! - `PUT /v1/documents/{id}` stores a document (`only_if_unique`: unless a
//!   near-duplicate is stored, atomically), durable before it answers;
//! - `POST /v1/check` finds a document's stored near-duplicates (and, with `paragraphs`,
//!   the documents sharing near-duplicate paragraphs with it);
//! - `GET` / `DELETE /v1/documents/{id}`, bulk forms under `/v1/bulk/`, `/healthz`,
//!   `/metrics` (Prometheus), `/v1/openapi.json`.
//!
//! Reads never wait for writes: checks query the store's indexes and a redb read
//! transaction. Writes go to one writer thread, which commits every write waiting for it
//! in one transaction (group commit); each request is answered after the fsync that
//! covers it. [`serve`] runs until its shutdown future resolves, then stops accepting,
//! finishes the requests in flight and their writes, and gives the store back.

#![warn(missing_docs)]

pub mod api;
mod error;
mod heavy;
mod listen;
mod metrics;
mod writer;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use neardup::fingerprint::signing_cost;
use neardup_store::{Backend, BackendReader, Outcome, Prepared, Preparer, Write};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot, Semaphore};
use utoipa::OpenApi;

use api::*;
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use metrics::Metrics;
use writer::{Failure, Job};

/// How the service runs, and the bounds that keep one client from taking it over
/// (docs/reliability.md has the table of what each bound answers).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Requests under /v1 must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Bytes of request bodies over 64 KB held at once, over every connection (at least
    /// `body_limit`): such a request waits for room before its body is read, within the
    /// body bound. Without it, a thousand connections each sending most of a 4 MB body held
    /// 4.2 GB, whatever `--memory` said.
    pub body_memory: usize,
    /// How often expired documents are swept.
    pub sweep_every: Duration,
    /// How often the store's indexes are snapshotted, when they changed (`None`: only
    /// when the service stops).
    pub snapshot_every: Option<Duration>,
    /// Time a connection has to send a request's head, from its start or from the end of
    /// its previous answer (so an idle keep-alive connection closes after it too).
    pub header_timeout: Duration,
    /// Time a request has to send its whole body (408 after it).
    pub body_timeout: Duration,
    /// Open connections at most; at the cap a new one takes the place of the oldest idle
    /// one, or waits for one to close when every one is answering a request.
    pub max_connections: usize,
    /// Matches listed per answer, most similar first; `more_matches` counts the rest.
    pub max_matches: usize,
    /// Items per bulk request (413 beyond).
    pub max_bulk_items: usize,
    /// Bytes of a document id (422 beyond).
    pub max_id_bytes: usize,
    /// Bytes of a request's header fields, names and values (431 beyond).
    pub max_header_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            token: None,
            body_limit: 4 << 20,
            body_memory: 256 << 20,
            sweep_every: Duration::from_secs(60),
            snapshot_every: Some(Duration::from_secs(600)),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_matches: 100,
            max_bulk_items: 10_000,
            max_id_bytes: 1024,
            max_header_bytes: 64 << 10,
        }
    }
}

/// Texts that cost more than this to sign ([`signing_cost`]: their length, more where NFKC
/// rewrites characters) are prepared as heavy work ([`heavy`]), not on an async worker. A
/// check's usual text (2 KB) stays inline. A text of this cost takes at most about 0.2 ms
/// to sign in full (a put, or a check with candidates), its sketch about 0.06 ms; 8 KB of
/// U+FDFA, which costs 720 KB, took 3 ms, and was signed inline until its cost was counted.
const INLINE_TEXT: usize = 8 << 10;

/// Whether `text` is signed on the async worker that read it: whether it costs at most
/// [`INLINE_TEXT`] (its length is looked at first, so that a long text is not read twice
/// on the worker).
fn inline(text: &str) -> bool {
    text.len() <= INLINE_TEXT && signing_cost(text) <= INLINE_TEXT
}

struct Inner<R> {
    reader: R,
    preparer: Preparer,
    /// Where the work whose cost grows with a request's size runs.
    heavy: heavy::Heavy,
    /// A permit a byte of the request bodies held ([`ServerConfig::body_memory`]).
    bodies: Arc<Semaphore>,
    jobs: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
    config: ServerConfig,
    failure: Arc<Failure>,
}

/// The state every handler shares.
struct AppState<R>(Arc<Inner<R>>);

impl<R> Clone for AppState<R> {
    fn clone(&self) -> Self {
        AppState(Arc::clone(&self.0))
    }
}

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The metrics registry refused a metric (a bug).
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// Accepting connections failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
    /// The writer thread died.
    #[error("the writer thread panicked")]
    Writer,
    /// The store failed (its disk or database), and the service stopped: opening it again
    /// recovers every acknowledged write from its write-ahead log.
    #[error("the store failed, so the service stopped: {0}")]
    StoreFailed(String),
}

/// The OpenAPI description of the service.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "neardup",
        description = "Near-duplicate checks of documents and paragraphs: estimated Jaccard similarity of word 5-shingle sets, at the store's threshold."
    ),
    paths(
        put_document,
        get_document,
        delete_document,
        check,
        bulk_put,
        bulk_check,
        health,
        metrics_text
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerScheme)
)]
pub struct ApiDoc;

/// The `bearer` security scheme the paths name (used when the service has a token).
struct BearerScheme;

impl utoipa::Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// The router over `store`'s reader, writing through `jobs`. Every request passes the
/// header bound and (under `/v1`, unknown routes and methods included) the token first,
/// then has its whole body read within the body bound, before any route sees it.
fn router<R: BackendReader>(state: AppState<R>) -> Router {
    let limit = state.0.config.body_limit;
    Router::new()
        .route(
            "/v1/documents/{*id}",
            put(put_document).get(get_document).delete(delete_document),
        )
        .route("/v1/check", post(check))
        .route("/v1/bulk/documents", post(bulk_put))
        .route("/v1/bulk/check", post(bulk_check))
        .route("/v1/openapi.json", get(openapi))
        .route("/healthz", get(health))
        .route("/metrics", get(metrics_text))
        .route_layer(middleware::from_fn(refuse_query))
        .route_layer(middleware::from_fn_with_state(state.clone(), measure))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.clone(), read_body))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), bound_head))
        .with_state(state)
}

/// Serves `store` on `listener` until `shutdown` resolves; then stops accepting, finishes
/// the requests in flight and their writes, and returns the store.
pub async fn serve<B: Backend>(
    listener: tokio::net::TcpListener,
    mut store: B,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<B, ServerError> {
    store.limit_matches(config.max_matches);
    let metrics = Arc::new(Metrics::new()?);
    metrics.documents.set(store.len() as i64);
    writer::set_memory(&store, &metrics);
    let (jobs, queue) = mpsc::channel(4096);
    let failure = Arc::new(Failure::default());
    let state = AppState(Arc::new(Inner {
        reader: store.reader(),
        preparer: store.preparer(),
        heavy: heavy::Heavy::per_core()?,
        bodies: Arc::new(Semaphore::new(body_permits(&config))),
        jobs: jobs.clone(),
        metrics: Arc::clone(&metrics),
        config: config.clone(),
        failure: Arc::clone(&failure),
    }));
    let writer_metrics = Arc::clone(&metrics);
    let writer_failure = Arc::clone(&failure);
    let writer = std::thread::Builder::new()
        .name("neardup-writer".into())
        .spawn(move || writer::run(store, queue, writer_metrics, writer_failure))?;
    let snapshots = config
        .snapshot_every
        .map(|every| tokio::spawn(snapshot_every(jobs.clone(), every)));
    let sweeper = tokio::spawn(sweep_every(jobs, config.sweep_every));
    let app = router(state);
    let bounds = listen::Bounds {
        max_connections: config.max_connections,
        header_timeout: config.header_timeout,
    };
    // Stopping on the store's failure too: a store that cannot write stays so until it
    // is opened again, which a supervisor's restart does (replaying its log).
    let failed = Arc::clone(&failure);
    let stop = async move {
        tokio::select! {
            () = shutdown => {}
            () = failed.stopped() => {}
        }
    };
    let served = listen::run(listener, app, bounds, stop).await;
    sweeper.abort();
    let _ = sweeper.await;
    if let Some(task) = snapshots {
        task.abort();
        let _ = task.await;
    }
    // Every sender is gone now: the writer finishes what it holds and returns the store.
    let store = tokio::task::spawn_blocking(move || writer.join())
        .await
        .map_err(|_| ServerError::Writer)?
        .map_err(|_| ServerError::Writer)?;
    served?;
    if let Some(reason) = failure.reason() {
        return Err(ServerError::StoreFailed(reason.to_string()));
    }
    Ok(store)
}

async fn snapshot_every(jobs: mpsc::Sender<Job>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        if jobs.send(Job::Snapshot).await.is_err() {
            return;
        }
    }
}

async fn sweep_every(jobs: mpsc::Sender<Job>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (reply, done) = oneshot::channel();
        if jobs.send(Job::Sweep(reply)).await.is_err() {
            return;
        }
        let _ = done.await;
    }
}

/// Refuses /v1 requests without the token, when there is one: every path under `/v1`,
/// unknown routes and methods included, so that nothing about the API answers a caller
/// without it.
async fn authorize<R: BackendReader>(
    State(state): State<AppState<R>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.0.config.token {
        let path = request.uri().path();
        if path == "/v1" || path.starts_with("/v1/") {
            let given = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer)
                .unwrap_or("");
            if !same(given.as_bytes(), token.as_bytes()) {
                state.0.metrics.request(
                    "unauthorized",
                    request.method().as_str(),
                    401,
                    Duration::ZERO,
                );
                return ApiError::unauthorized().into_response();
            }
        }
    }
    next.run(request).await
}

/// The token of an `Authorization` value of the Bearer scheme: the scheme's name in any
/// case (RFC 9110 § 11.1), white space around the token ignored.
fn bearer(value: &str) -> Option<&str> {
    let value = value.trim();
    let (scheme, token) = value.split_once([' ', '\t'])?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Refuses a request whose header fields (names and values) exceed the bound with the
/// API's 431, where hyper's own (for far larger heads) has no body; and a path longer
/// than an id may be with 414.
async fn bound_head<R: BackendReader>(
    State(state): State<AppState<R>>,
    request: Request,
    next: Next,
) -> Response {
    let config = &state.0.config;
    let bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if bytes > config.max_header_bytes {
        return ApiError::headers_too_large(config.max_header_bytes).into_response();
    }
    // The longest path an id allows, percent-encoded, with its route.
    let longest = 3 * config.max_id_bytes + 64;
    if request.uri().path().len() > longest {
        return ApiError::uri_too_long(longest).into_response();
    }
    next.run(request).await
}

/// Reads the whole body within the body bound and the size limit, so that a client
/// sending a byte a second is answered 408 instead of holding a connection and a task;
/// the routes then read it from memory. A body declared larger than the limit is refused
/// before any of it is read (and before `Expect: 100-continue` is answered), what comes of
/// it then read away ([`linger`]); a body
/// longer than [`SMALL_BODY`] waits for its room in [`ServerConfig::body_memory`] (its
/// declared length, or the limit when it has none) before it is read, and keeps it until
/// its request is answered.
async fn read_body<R: BackendReader>(
    State(state): State<AppState<R>>,
    request: Request,
    next: Next,
) -> Response {
    let config = &state.0.config;
    if let Some(encoding) = request.headers().get(header::CONTENT_ENCODING) {
        if !encoding.as_bytes().eq_ignore_ascii_case(b"identity") {
            return ApiError::unsupported_encoding(&String::from_utf8_lossy(encoding.as_bytes()))
                .into_response();
        }
    }
    // hyper decodes the chunked coding (which it requires last) and passes any other on.
    for coding in request.headers().get_all(header::TRANSFER_ENCODING) {
        let coding = String::from_utf8_lossy(coding.as_bytes());
        if coding
            .split(',')
            .any(|c| !c.trim().eq_ignore_ascii_case("chunked"))
        {
            return ApiError::unsupported_transfer_coding(&coding).into_response();
        }
    }
    let (parts, mut body) = request.into_parts();
    // The length hyper framed the body by: exact for a `Content-Length` (0 for a request
    // without a body, such as a GET), unknown for a chunked one.
    let declared = axum::body::HttpBody::size_hint(&body).exact();
    if declared.is_some_and(|n| n > config.body_limit as u64) {
        linger(&parts.headers, body, declared, config);
        return ApiError::too_large(config.body_limit).into_response();
    }
    let started = Instant::now();
    let room = declared.map_or(config.body_limit, |n| n as usize);
    let room = u32::try_from(room.min(body_permits(config))).unwrap_or(u32::MAX);
    let held = if room as usize <= SMALL_BODY {
        // Checks of a page or two are read at once: waiting in line behind large bodies,
        // they went unanswered for 30 s while 1,000 connections sent 4 MB each.
        None
    } else {
        let wait = Arc::clone(&state.0.bodies).acquire_many_owned(room);
        match tokio::time::timeout(config.body_timeout, wait).await {
            Ok(Ok(permit)) => Some(permit),
            Ok(Err(_)) => return ApiError::unavailable().into_response(),
            Err(_) => return ApiError::no_room_for_bodies().into_response(),
        }
    };
    let left = config.body_timeout.saturating_sub(started.elapsed());
    let read = collect_body(&mut body, declared, config.body_limit);
    let bytes = match tokio::time::timeout(left, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            // A chunked body past the limit: the rest of it, as one declared too long.
            linger(&parts.headers, body, None, config);
            return e.into_response();
        }
        Err(_) => return ApiError::body_timeout(config.body_timeout).into_response(),
    };
    let response = next
        .run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await;
    drop(held);
    response
}

/// Bodies declared this long or shorter are read without waiting for room in
/// [`ServerConfig::body_memory`]: at most `max_connections` of them at once (64 MB with
/// the defaults).
const SMALL_BODY: usize = 64 << 10;

/// Bytes the request bodies of `config` may hold at once: the room of
/// [`ServerConfig::body_memory`] (at least one body) and a small body for every
/// connection. What `neardup serve --memory` sets aside before the store's share.
pub fn bodies_memory(config: &ServerConfig) -> usize {
    body_permits(config).saturating_add(config.max_connections.saturating_mul(SMALL_BODY))
}

/// The permits of [`Inner::bodies`]: the configured bytes, at least one body's.
fn body_permits(config: &ServerConfig) -> usize {
    config
        .body_memory
        .max(config.body_limit)
        .min(Semaphore::MAX_PERMITS)
}

/// Bytes of a refused body read and dropped after its answer, at most, in limits: a client
/// that sends a body whole before reading the answer (without `Expect: 100-continue`, as
/// most do) met a closed connection in the middle of it, and saw a broken pipe or a reset
/// instead of the 413 and its reason. Beyond this it does.
const LINGER_LIMITS: u64 = 4;

/// Reads what is left of a refused request's `body` (`declared` bytes long, when known)
/// and drops it, on a task of its own after the answer goes out, within the body bound and
/// [`LINGER_LIMITS`]: the client then reads the answer, and the connection takes its next
/// request. Not when the client waits for `100 Continue` (reading would ask it to send
/// what is refused), nor for a body declared longer than that.
fn linger(
    headers: &HeaderMap,
    mut body: axum::body::Body,
    declared: Option<u64>,
    config: &ServerConfig,
) {
    use http_body_util::BodyExt;
    let most = (config.body_limit as u64).saturating_mul(LINGER_LIMITS);
    let waits = headers
        .get(header::EXPECT)
        .is_some_and(|e| e.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if waits || declared.is_some_and(|n| n > most) {
        return;
    }
    let within = config.body_timeout;
    tokio::spawn(async move {
        let mut read = 0u64;
        let _ = tokio::time::timeout(within, async {
            while let Some(Ok(frame)) = body.frame().await {
                read += frame.data_ref().map_or(0, |d| d.len() as u64);
                if read > most {
                    break;
                }
            }
        })
        .await;
    });
}

/// `body` read whole into one buffer of its declared length (so that a large body is one
/// allocation, given back whole), at most `limit` bytes.
async fn collect_body(
    body: &mut axum::body::Body,
    declared: Option<u64>,
    limit: usize,
) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let mut out = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_json(format!("cannot read the body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(ApiError::too_large(limit));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

/// Refuses a query string under `/v1`: no route reads one, and a put's options there
/// (`?only_if_unique=true`) would otherwise be dropped in silence, storing a document the
/// caller asked to store only if unique. Options go in the JSON body.
async fn refuse_query(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    match request.uri().query() {
        Some(query) if !query.is_empty() && path.starts_with("/v1/") => {
            let shown: String = query.chars().take(100).collect();
            ApiError::invalid(format!(
                "the query string: this API reads no query parameters (got \"{shown}\"); \
                 options such as \"only_if_unique\" and \"ttl\" go in the JSON body"
            ))
            .into_response()
        }
        _ => next.run(request).await,
    }
}

/// Compares in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Counts every routed request by route, method and status.
async fn measure<R: BackendReader>(
    State(state): State<AppState<R>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let response = next.run(request).await;
    state.0.metrics.request(
        route.as_ref().map_or("unmatched", MatchedPath::as_str),
        method.as_str(),
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

async fn not_found<R: BackendReader>(
    State(state): State<AppState<R>>,
    request: Request,
) -> ApiError {
    state
        .0
        .metrics
        .request("unmatched", request.method().as_str(), 404, Duration::ZERO);
    ApiError::not_found(format!(
        "no route {} {}",
        request.method(),
        request.uri().path()
    ))
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

/// The body, or the error its reading met (over the limit, most often).
fn body(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(limit)
        } else {
            ApiError::bad_json(format!("cannot read the body: {e}"))
        }
    })
}

/// `bytes` as a `T` that the schema says is a JSON object: not JSON is `bad_json`, JSON of
/// another shape (an array of the fields included, which serde would take) or with wrong
/// fields `invalid_request`. The field a value error is at is named (`ttl: invalid
/// value…`).
fn parse<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    if !api::is_object(bytes) && serde_json::from_slice::<serde_json::Value>(bytes).is_ok() {
        return Err(ApiError::invalid(format!("{what}: expected a JSON object")));
    }
    parse_any(bytes, what)
}

/// `bytes` as a `T` of any JSON shape, errors as [`parse`] gives them.
fn parse_any<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    let classify = |e: serde_json::Error, message: String| {
        if e.classify() != serde_json::error::Category::Data {
            return ApiError::bad_json(message);
        }
        // A field refused as soon as its key is read (an unknown one) comes before the rest
        // of the body is parsed: a body that is not JSON at all is still `bad_json`, at the
        // place its syntax breaks.
        match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(_) => ApiError::invalid(message),
            Err(syntax) => ApiError::bad_json(format!("{what}: {syntax}")),
        }
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        let message = if at == "." {
            format!("{what}: {inner}")
        } else {
            format!("{what}: {at}: {inner}")
        };
        classify(inner, message)
    })?;
    de.end().map_err(|e| {
        let message = format!("{what}: {e}");
        classify(e, message)
    })?;
    Ok(value)
}

/// The document of a body that gives its text or its fingerprint, prepared on the calling
/// thread.
fn prepare_here(
    preparer: &Preparer,
    text: Option<String>,
    fingerprint: Option<String>,
    paragraphs: bool,
    what: &str,
) -> Result<Prepared, ApiError> {
    match (text, fingerprint) {
        (Some(text), None) => Ok(preparer.prepare(&text, paragraphs)),
        (None, Some(fp)) if !paragraphs => {
            let sig = decode(&fp, &format!("{what}fingerprint"))?;
            Ok(preparer.from_signature(sig))
        }
        (None, Some(_)) => Err(ApiError::invalid(format!(
            "{what}paragraphs need the text, not a fingerprint"
        ))),
        (Some(_), Some(_)) => Err(ApiError::invalid(format!(
            "{what}give \"text\" or \"fingerprint\", not both"
        ))),
        (None, None) => Err(ApiError::invalid(format!(
            "{what}give the document's \"text\" (or its \"fingerprint\")"
        ))),
    }
}

/// Refuses an id the service would not store: empty, or longer than the bound.
fn check_id(id: &str, max: usize, what: &str) -> Result<(), ApiError> {
    if id.is_empty() {
        return Err(ApiError::invalid(format!("{what}the id is empty")));
    }
    if id.len() > max {
        return Err(ApiError::invalid(format!(
            "{what}the id is {} bytes, more than the limit of {max}",
            id.len()
        )));
    }
    Ok(())
}

impl<R: BackendReader> AppState<R> {
    fn limit(&self) -> usize {
        self.0.config.body_limit
    }

    fn max_matches(&self) -> usize {
        self.0.config.max_matches
    }

    /// Runs `work` on a request's text: here when it is `here` ([`inline`], or no text),
    /// as heavy work otherwise.
    async fn sized<T: Send + 'static>(
        &self,
        here: bool,
        work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        if !here {
            self.0.heavy.run(work).await
        } else {
            work()
        }
    }

    /// Applies `writes` through the writer; their outcomes once durable.
    async fn write(&self, writes: Vec<Write>) -> Result<Vec<Outcome>, ApiError> {
        let (reply, done) = oneshot::channel();
        self.0
            .jobs
            .send(Job::Writes(writes, reply))
            .await
            .map_err(|_| ApiError::unavailable())?;
        done.await
            .map_err(|_| ApiError::unavailable())?
            .map_err(|f| match f.memory {
                true => ApiError::memory_full(f.message),
                false => ApiError::write_failed(f.message, f.unsure),
            })
    }
}

/// The id in the path. One axum cannot decode (not UTF-8 once percent-decoded) is refused
/// in the API's error form: axum's own answer is plain text. Found by fuzzing.
fn path_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    id.map(|Path(id)| id)
        .map_err(|e| ApiError::invalid(format!("the id: {}", e.body_text())))
}

/// Stores a document.
#[utoipa::path(
    put,
    path = "/v1/documents/{id}",
    params(("id" = String, Path, description = "The document's id (any string; '/' allowed)")),
    request_body = PutBody,
    responses(
        (status = 200, description = "Stored (or, with only_if_unique, refused: see matches); durable", body = PutResponse),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No token or the wrong one", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 415, description = "A compressed body (a Content-Encoding other than identity)", body = ErrorBody),
        (status = 501, description = "A transfer coding other than chunked", body = ErrorBody),
        (status = 503, description = "No room for the body within the body timeout (--body-memory), the store failing, or the service stopping", body = ErrorBody),
        (status = 422, description = "Missing or wrong fields", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn put_document<R: BackendReader>(
    State(state): State<AppState<R>>,
    id: Result<Path<String>, PathRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<PutResponse>, ApiError> {
    let id = path_id(id)?;
    check_id(&id, state.0.config.max_id_bytes, "")?;
    let req: PutBody = parse(&body(raw, state.limit())?, "the body")?;
    let preparer = state.0.preparer.clone();
    let here = req.text.as_deref().is_none_or(inline);
    let doc = state
        .sized(here, move || {
            prepare_here(&preparer, req.text, req.fingerprint, false, "")
        })
        .await?;
    let not_indexed = doc.paragraphs_not_indexed();
    let write = Write::Put {
        id,
        doc: Box::new(doc),
        ttl: req.ttl.map(Duration::from_secs),
        only_if_unique: req.only_if_unique,
    };
    let outcome = state.write(vec![write]).await?.pop();
    let outcome = outcome.ok_or_else(|| ApiError::internal("the writer gave no outcome"))?;
    Ok(Json(PutResponse::of(
        outcome,
        state.max_matches(),
        not_indexed,
    )))
}

/// A stored document.
#[utoipa::path(
    get,
    path = "/v1/documents/{id}",
    params(("id" = String, Path, description = "The document's id")),
    responses(
        (status = 200, description = "The document", body = DocumentResponse),
        (status = 401, description = "No token or the wrong one", body = ErrorBody),
        (status = 404, description = "No such document (or it expired)", body = ErrorBody),
        (status = 422, description = "An id that is not UTF-8", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn get_document<R: BackendReader>(
    State(state): State<AppState<R>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<DocumentResponse>, ApiError> {
    let id = path_id(id)?;
    check_id(&id, state.0.config.max_id_bytes, "")?;
    match state.0.reader.get(&id)? {
        Some(doc) => Ok(Json(doc.into())),
        None => Err(ApiError::not_found(format!("no document {id:?}"))),
    }
}

/// Removes a document.
#[utoipa::path(
    delete,
    path = "/v1/documents/{id}",
    params(("id" = String, Path, description = "The document's id")),
    responses(
        (status = 200, description = "Removed; durable", body = DeleteResponse),
        (status = 401, description = "No token or the wrong one", body = ErrorBody),
        (status = 404, description = "No such document", body = ErrorBody),
        (status = 422, description = "An id that is not UTF-8", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn delete_document<R: BackendReader>(
    State(state): State<AppState<R>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<DeleteResponse>, ApiError> {
    let id = path_id(id)?;
    check_id(&id, state.0.config.max_id_bytes, "")?;
    let outcome = state.write(vec![Write::Delete { id: id.clone() }]).await?;
    match outcome.first() {
        Some(Outcome::Delete { removed: true }) => Ok(Json(DeleteResponse { removed: true })),
        _ => Err(ApiError::not_found(format!("no document {id:?}"))),
    }
}

/// The stored near-duplicates of a document.
#[utoipa::path(
    post,
    path = "/v1/check",
    request_body = CheckBody,
    responses(
        (status = 200, description = "Its stored near-duplicates", body = CheckResponse),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No token or the wrong one", body = ErrorBody),
        (status = 409, description = "Paragraphs asked of a store without them", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 415, description = "A compressed body (a Content-Encoding other than identity)", body = ErrorBody),
        (status = 501, description = "A transfer coding other than chunked", body = ErrorBody),
        (status = 503, description = "No room for the body within the body timeout (--body-memory), the store failing, or the service stopping", body = ErrorBody),
        (status = 422, description = "Missing or wrong fields", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn check<R: BackendReader>(
    State(state): State<AppState<R>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<CheckResponse>, ApiError> {
    let bytes = body(raw, state.limit())?;
    // The common body, `{"text": …}`, its text borrowed from the body; the rest (and any
    // error) through the full parse.
    if let Some(CheckText { text }) = CheckText::parse(&bytes) {
        if inline(&text) {
            return Ok(Json(state.check_text(&text).await?));
        }
    }
    let req: CheckBody = parse(&bytes, "the body")?;
    Ok(Json(state.check(req, "").await?))
}

impl<R: BackendReader> AppState<R> {
    /// The answer to a check of an [`inline`] `text`, without paragraphs.
    async fn check_text(&self, text: &str) -> Result<CheckResponse, ApiError> {
        // The common case: most texts have no candidate, and need no fingerprint.
        let checked = self
            .0
            .reader
            .check_text_async(&self.0.preparer, text)
            .await?;
        let (matches, more_matches) = capped(checked.hits, self.max_matches());
        Ok(CheckResponse {
            matches,
            more_matches,
            partial: checked.partial,
            paragraphs: None,
        })
    }

    /// The answer to one check.
    async fn check(&self, req: CheckBody, what: &str) -> Result<CheckResponse, ApiError> {
        let reader = &self.0.reader;
        if req.paragraphs && !reader.config().paragraphs {
            return Err(ApiError::paragraphs_disabled());
        }
        if let (Some(text), None, false) = (&req.text, &req.fingerprint, req.paragraphs) {
            if inline(text) {
                return self.check_text(text).await;
            }
        }
        let (paragraphs, max) = (req.paragraphs, self.max_matches());
        // A long text's paragraphs are looked up as heavy work too (a 3 MB text has
        // 12,000), so that no lookup of a request's size runs on an async worker.
        let (reader, preparer) = (reader.clone(), self.0.preparer.clone());
        let what = what.to_string();
        let here = req.text.as_deref().is_none_or(inline);
        self.sized(here, move || {
            let doc = prepare_here(&preparer, req.text, req.fingerprint, paragraphs, &what)?;
            check_here(&reader, &doc, paragraphs, max)
        })
        .await
    }
}

/// The answer to a check of the prepared `doc`, on the calling thread.
fn check_here<R: BackendReader>(
    reader: &R,
    doc: &Prepared,
    paragraphs: bool,
    max_matches: usize,
) -> Result<CheckResponse, ApiError> {
    let checked = reader.check(doc)?;
    let (matches, more_matches) = capped(checked.hits, max_matches);
    let paragraphs = if paragraphs {
        let hits = reader.check_paragraphs(doc)?;
        Some(hits.into_iter().map(ParagraphJson::from).collect())
    } else {
        None
    };
    Ok(CheckResponse {
        matches,
        more_matches,
        partial: checked.partial,
        paragraphs,
    })
}

/// The items of a bulk body: a JSON array, or JSON Lines (NDJSON); at most `max` of them
/// (counted before any is parsed).
fn items<T: DeserializeOwned>(
    headers: &HeaderMap,
    bytes: &[u8],
    max: usize,
) -> Result<Vec<T>, ApiError> {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("ndjson") || v.contains("jsonl"))
        || api::is_object(bytes);
    if !ndjson {
        let values: Vec<serde_json::Value> = parse_any(bytes, "the body (a JSON array)")?;
        if values.len() > max {
            return Err(ApiError::too_many_items(values.len(), max));
        }
        return values
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse(v.to_string().as_bytes(), &format!("items[{i}]")))
            .collect();
    }
    let lines: Vec<(usize, &[u8])> = bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| line.iter().any(|b| !b.is_ascii_whitespace()))
        .collect();
    if lines.len() > max {
        return Err(ApiError::too_many_items(lines.len(), max));
    }
    lines
        .into_iter()
        .map(|(i, line)| parse(line, &format!("line {}", i + 1)))
        .collect()
}

/// Stores many documents, in one commit.
#[utoipa::path(
    post,
    path = "/v1/bulk/documents",
    request_body(content = Vec<BulkPutItem>, description = "A JSON array, or one JSON object per line (application/x-ndjson)"),
    responses(
        (status = 200, description = "What each put did, in order; durable", body = Vec<BulkPutResult>),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No token or the wrong one", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 415, description = "A compressed body (a Content-Encoding other than identity)", body = ErrorBody),
        (status = 501, description = "A transfer coding other than chunked", body = ErrorBody),
        (status = 503, description = "No room for the body within the body timeout (--body-memory), the store failing, or the service stopping", body = ErrorBody),
        (status = 422, description = "An item with missing or wrong fields (named)", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn bulk_put<R: BackendReader>(
    State(state): State<AppState<R>>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Vec<BulkPutResult>>, ApiError> {
    let config = &state.0.config;
    let list: Vec<BulkPutItem> =
        items(&headers, &body(raw, state.limit())?, config.max_bulk_items)?;
    for (i, item) in list.iter().enumerate() {
        check_id(&item.id, config.max_id_bytes, &format!("items[{i}]: "))?;
    }
    let preparer = state.0.preparer.clone();
    let (ids, writes) = state
        .0
        .heavy
        .run(move || {
            let mut writes = Vec::with_capacity(list.len());
            let mut ids = Vec::with_capacity(list.len());
            for (i, item) in list.into_iter().enumerate() {
                let what = format!("items[{i}]: ");
                let doc = prepare_here(&preparer, item.text, item.fingerprint, false, &what)?;
                ids.push((item.id.clone(), doc.paragraphs_not_indexed()));
                writes.push(Write::Put {
                    id: item.id,
                    doc: Box::new(doc),
                    ttl: item.ttl.map(Duration::from_secs),
                    only_if_unique: item.only_if_unique,
                });
            }
            Ok((ids, writes))
        })
        .await?;
    let outcomes = state.write(writes).await?;
    let max = state.max_matches();
    Ok(Json(
        ids.into_iter()
            .zip(outcomes)
            .map(|((id, not_indexed), o)| BulkPutResult {
                id,
                result: PutResponse::of(o, max, not_indexed),
            })
            .collect(),
    ))
}

/// Checks many documents.
#[utoipa::path(
    post,
    path = "/v1/bulk/check",
    request_body(content = Vec<CheckBody>, description = "A JSON array, or one JSON object per line (application/x-ndjson)"),
    responses(
        (status = 200, description = "Each document's stored near-duplicates, in order", body = Vec<CheckResponse>),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No token or the wrong one", body = ErrorBody),
        (status = 409, description = "Paragraphs asked of a store without them", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 415, description = "A compressed body (a Content-Encoding other than identity)", body = ErrorBody),
        (status = 501, description = "A transfer coding other than chunked", body = ErrorBody),
        (status = 503, description = "No room for the body within the body timeout (--body-memory), the store failing, or the service stopping", body = ErrorBody),
        (status = 422, description = "An item with missing or wrong fields (named)", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn bulk_check<R: BackendReader>(
    State(state): State<AppState<R>>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Vec<CheckResponse>>, ApiError> {
    let list: Vec<CheckBody> = items(
        &headers,
        &body(raw, state.limit())?,
        state.0.config.max_bulk_items,
    )?;
    let reader = state.0.reader.clone();
    if list.iter().any(|c| c.paragraphs) && !reader.config().paragraphs {
        return Err(ApiError::paragraphs_disabled());
    }
    let preparer = state.0.preparer.clone();
    let max = state.max_matches();
    let out = state
        .0
        .heavy
        .run(move || {
            list.into_iter()
                .enumerate()
                .map(|(i, item)| {
                    let what = format!("items[{i}]: ");
                    let paragraphs = item.paragraphs;
                    let doc =
                        prepare_here(&preparer, item.text, item.fingerprint, paragraphs, &what)?;
                    check_here(&reader, &doc, paragraphs, max)
                })
                .collect::<Result<Vec<_>, ApiError>>()
        })
        .await?;
    Ok(Json(out))
}

/// Whether the service is up and its store can write, and how many documents it holds.
#[utoipa::path(get, path = "/healthz", responses(
    (status = 200, description = "Up", body = Health),
    (status = 503, description = "The store failed (its disk or database): the service is stopping", body = Health),
))]
async fn health<R: BackendReader>(State(state): State<AppState<R>>) -> (StatusCode, Json<Health>) {
    let documents = state.0.reader.len();
    match state.0.failure.reason() {
        None => (
            StatusCode::OK,
            Json(Health {
                status: "ok".into(),
                documents,
                error: None,
            }),
        ),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Health {
                status: "failing".into(),
                documents,
                error: Some(reason.to_string()),
            }),
        ),
    }
}

/// Metrics in Prometheus's text format.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text", body = String, content_type = "text/plain")))]
async fn metrics_text<R: BackendReader>(State(state): State<AppState<R>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.0.metrics.render(),
    )
}

async fn openapi() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => ApiError::internal(format!("the OpenAPI document: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A text is signed on the worker that read it by what signing it costs, not by its
    /// length alone: 300 bytes of U+FDFA are 3,300 once NFKC is done with them.
    #[test]
    fn texts_nfkc_expands_are_not_signed_inline() {
        assert!(inline(&"a ".repeat(INLINE_TEXT / 2)));
        assert!(!inline(&"a".repeat(INLINE_TEXT + 1)));
        assert!(inline(&"中文".repeat(INLINE_TEXT / 8)));
        assert!(inline(&"\u{FDFA}".repeat(20)));
        assert!(!inline(&"\u{FDFA}".repeat(100)));
    }

    /// However many requests bring heavy work at once, no more than the permits run
    /// together; every one runs, on a thread of lowered priority; a panic in one is that
    /// request's internal error, and the next ones run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn heavy_work_runs_no_more_at_once_than_its_permits() {
        let permits = 3;
        let heavy = Arc::new(heavy::Heavy::new(permits).unwrap());
        let (running, most, done) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let (heavy, running, most, done) =
                    (heavy.clone(), running.clone(), most.clone(), done.clone());
                tokio::spawn(async move {
                    heavy
                        .run(move || {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(5));
                            running.fetch_sub(1, Ordering::SeqCst);
                            if i == 7 {
                                panic!("the seventh work fails");
                            }
                            done.fetch_add(1, Ordering::SeqCst);
                            #[cfg(target_os = "linux")]
                            assert_eq!(neardup::thread_nice(), Some(neardup::LOWER_NICE));
                            Ok(i)
                        })
                        .await
                })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.unwrap() {
                Ok(n) => assert_eq!(n, i),
                Err(e) => {
                    assert_eq!(i, 7, "{e:?}");
                    assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
                }
            }
        }
        assert_eq!(done.load(Ordering::SeqCst), 39);
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= permits,
            "{most} ran at once, with {permits} permits"
        );
        assert!(
            most > 1,
            "the work never overlapped: the test shows nothing"
        );
    }

    /// The text-only fast path reads a body exactly when the full parse reads it as a
    /// text-only check, and reads the same text; the others fall through to the full parse.
    #[test]
    fn the_text_only_parse_agrees_with_the_full_one() {
        let bodies: &[&str] = &[
            r#"{"text": "plain words"}"#,
            r#"{"text": "escapes \n\n and \u201ctypographic\u201d \ud83d\ude00"}"#,
            "{\"text\": \"raw \u{201c}UTF-8\u{201d}\"}",
            r#"  {"text":""}  "#,
            r#"{"text": "a", "paragraphs": false}"#,
            r#"{"text": "a", "paragraphs": true}"#,
            r#"{"paragraphs": false, "text": "a"}"#,
            r#"{"text": null}"#,
            r#"{"text": 5}"#,
            r#"{"text": "a", "text": "b"}"#,
            r#"{"text": "a", "txt": "b"}"#,
            r#"{"fingerprint": "AAAA"}"#,
            r#"{"text": "a", "fingerprint": "AAAA"}"#,
            r#"{"text": "a"} x"#,
            r#"{"text": "a"}{}"#,
            r#"{"text": "\ud800"}"#,
            r#"{"text": "a""#,
            r#"["a"]"#,
            r#"{}"#,
            "",
            "null",
        ];
        let mut fast_read = 0;
        for body in bodies {
            let full = parse::<CheckBody>(body.as_bytes(), "the body");
            match CheckText::parse(body.as_bytes()) {
                Some(fast) => {
                    fast_read += 1;
                    let full = full.unwrap_or_else(|e| panic!("{body}: fast read it, full: {e:?}"));
                    assert_eq!(full.text.as_deref(), Some(&*fast.text), "{body}");
                    assert!(full.fingerprint.is_none() && !full.paragraphs, "{body}");
                }
                None => {
                    if let Ok(full) = full {
                        assert!(
                            full.text.is_none()
                                || full.fingerprint.is_some()
                                || body.contains("paragraphs"),
                            "{body}: a text-only body the fast parse missed"
                        );
                    }
                }
            }
        }
        // The first four. `["a"]` (serde would read a struct from an array of its fields)
        // is refused by both: the schema says object.
        assert_eq!(fast_read, 4);
        assert!(parse::<CheckBody>(br#"["a"]"#, "the body").is_err());
    }
}

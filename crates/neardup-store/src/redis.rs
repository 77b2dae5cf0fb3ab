//! [`RedisStore`]: the document corpus of [`DocumentStore`](crate::DocumentStore) kept in
//! a Redis Cluster, so that many stateless service instances can share one replicated
//! corpus that outgrows a host. It decides exactly as the embedded store does, by the same
//! code: the same candidates (documents agreeing with the query in some band), the same
//! [`Rule::matches`](neardup::decide::Rule::matches) on them, and a batch of writes
//! decided by [`crate::decide::plan`] against the corpus as read before it.
//!
//! # Layout (keys under a namespace `ns`)
//!
//! | key | what |
//! |---|---|
//! | `ns:meta` | hash: format, threshold, paragraphs, fingerprint and sketch versions, bucket bits |
//! | `ns:next`, `ns:len` | the internal id counter; documents stored (expired ones until swept) |
//! | `ns:i:{t}:ID` | the document `ID` → its internal id `n` (16 hex digits) |
//! | `ns:d:{t}:n` | its record: expiry (u64 LE, 0 for none), [`Signature`] bytes, `ID` |
//! | `ns:p:{t}:n` | its paragraphs (start, end as u32 LE, signature), in a store with them |
//! | `ns:b:{BBkkkk}` | bucket: band `BB`, leading bits `kkkk` of the band key; a sorted set |
//! | `ns:q:{BBkkkk}` | the same for paragraphs |
//! | `ns:x:{s}` | expiry index, 64 shards: members (expiry BE, t, n) |
//!
//! `t` is a 16-bit tag from the id's xxh3 hash, so a document's id key and records share
//! one hash slot and change together in one script. Bucket members are exact bytes —
//! band key (4, big-endian), tag (2), internal id (8) and for paragraphs the paragraph's
//! position (2) — all with score 0, read by prefix with `ZRANGEBYLEX` (the first
//! [`RUN_LEADERS`] of a key): no bit of a key or id ever passes through a double. A query reads all its buckets in one round, then the
//! records of its candidates in a second.
//!
//! # Checks share connections
//!
//! Checks go through one asynchronous cluster connection (the `redis` crate's
//! multiplexed cluster client), shared by every reader of a store: each node has one
//! socket, and the commands of all checks in flight at once are written to it together
//! and their replies read together. A check waits for its replies without holding a
//! thread ([`RedisReader::check_text_async`], which the service awaits), so concurrent
//! checks pipeline one another's commands: per check, Redis and the service make a
//! fraction of a system call per node instead of a write and a read each. The synchronous
//! methods run the same code to completion (on the caller's runtime, or on a small one
//! of this module's own outside any).
//!
//! # Why a half-written insert is never seen
//!
//! A put writes its bucket members first, then, in one Lua script on its id's slot, the
//! id key and the record (deleting the record the id held before), then removes the old
//! record's members. A query accepts a candidate only if its record exists (and has not
//! expired): members without a record — of an insert not yet committed, or of a document
//! removed — are skipped. The record and the id key appear and vanish together, so a
//! document is seen by checks exactly when `get` sees it. Internal ids are never reused.
//!
//! # Durability
//!
//! After each batch the writer sends `WAIT replicas timeout` to every primary; a batch is
//! acknowledged only if each primary's replicas (at least `wait_replicas` of them) have it,
//! so a write acknowledged survives the failover of its primary.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ::redis::cluster::{cluster_pipe, ClusterClient, ClusterConnection, ClusterPipeline};
use ::redis::cluster_async::ClusterConnection as AsyncConnection;
use ::redis::{Cmd, RedisError, Value};
use futures_util::future::try_join_all;
use neardup::batch::RUN_LEADERS;
use neardup::decide::Signature;
use neardup::jaccard::{BandKeys, Threshold, SKETCH_VERSION};

use crate::backend::{Backend, BackendReader};
use crate::clock::{expired, Clock, SystemClock};
use crate::decide::{
    self, Candidates, Checked, DocRecord, Hit, Outcome, ParagraphHit, Plan, StoreView,
};
use crate::decide::{StoredDoc, StoredParagraphs, Write};
use crate::error::{Result, StoreError};
use crate::prepare::{other_version, DocConfig, Prepared, Preparer, MAX_PARAGRAPHS};

/// The `format` a Redis corpus records in its `meta` hash.
pub const REDIS_FORMAT: u64 = 1;

/// Shards of the expiry index.
const EXPIRY_SHARDS: u16 = 64;

/// Bytes of a paragraph entry in a `p` record: start and end (u32 LE), then the signature.
const PARA_BYTES: usize = 8 + Signature::BYTES;

/// How to reach a corpus in Redis, and how writes are acknowledged. Not part of the corpus:
/// every instance may choose its own.
#[derive(Clone, Debug)]
pub struct RedisOptions {
    /// The corpus's key prefix (letters, digits, `_`, `-`, `.`): several corpora can share
    /// a cluster.
    pub namespace: String,
    /// Replicas of each primary that must have a batch before it is acknowledged (`WAIT`);
    /// 0 acknowledges once the primaries have it.
    pub wait_replicas: u32,
    /// How long a batch waits for its replicas before it fails.
    pub wait_timeout: Duration,
    /// Connection and response timeout of each command.
    pub timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> RedisOptions {
        RedisOptions {
            namespace: "neardup".into(),
            wait_replicas: 1,
            wait_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Where [`RedisStore::apply_interrupted`] stops, as a writer that dies there would.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// After the bucket members of new documents, before their records.
    BeforeCommit,
    /// After the records, before the replaced documents' members are removed.
    BeforeCleanup,
}

/// Key names under a namespace.
#[derive(Clone, Debug)]
struct Keys {
    ns: String,
    bits: u32,
}

/// Which band index a bucket belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Docs,
    Paragraphs,
}

impl Keys {
    fn meta(&self) -> String {
        format!("{}:meta", self.ns)
    }

    fn next(&self) -> String {
        format!("{}:next", self.ns)
    }

    fn len(&self) -> String {
        format!("{}:len", self.ns)
    }

    fn id(&self, tag: u16, id: &str) -> Vec<u8> {
        let mut key = format!("{}:i:{{{tag:04x}}}:", self.ns).into_bytes();
        key.extend_from_slice(id.as_bytes());
        key
    }

    fn doc_prefix(&self, tag: u16) -> String {
        format!("{}:d:{{{tag:04x}}}:", self.ns)
    }

    fn para_prefix(&self, tag: u16) -> String {
        format!("{}:p:{{{tag:04x}}}:", self.ns)
    }

    fn doc(&self, tag: u16, n: u64) -> String {
        format!("{}{n:016x}", self.doc_prefix(tag))
    }

    fn paras(&self, tag: u16, n: u64) -> String {
        format!("{}{n:016x}", self.para_prefix(tag))
    }

    /// The bucket of band `band`'s key `key`: split by the key's leading bits.
    fn bucket(&self, kind: Kind, band: usize, key: u32) -> String {
        let letter = match kind {
            Kind::Docs => 'b',
            Kind::Paragraphs => 'q',
        };
        let prefix = if self.bits == 0 {
            0
        } else {
            key >> (32 - self.bits)
        };
        let width = self.bits.div_ceil(4) as usize;
        format!("{}:{letter}:{{{band:02x}{prefix:0width$x}}}", self.ns)
    }

    fn expiry(&self, tag: u16) -> String {
        format!("{}:x:{{{:02x}}}", self.ns, tag % EXPIRY_SHARDS)
    }

    fn expiry_shard(&self, shard: u16) -> String {
        format!("{}:x:{{{shard:02x}}}", self.ns)
    }
}

/// The hash tag of a document id: its keys share a slot.
fn tag_of(id: &str) -> u16 {
    (xxhash_rust::xxh3::xxh3_64(id.as_bytes()) >> 48) as u16
}

/// A bucket member: band key, tag, internal id (and paragraph position).
fn member(key: u32, tag: u16, n: u64, para: Option<u16>) -> Vec<u8> {
    let mut m = Vec::with_capacity(16);
    m.extend_from_slice(&key.to_be_bytes());
    m.extend_from_slice(&tag.to_be_bytes());
    m.extend_from_slice(&n.to_be_bytes());
    if let Some(p) = para {
        m.extend_from_slice(&p.to_be_bytes());
    }
    m
}

/// A candidate found in a bucket: (tag, internal id, paragraph position).
type Found = (u16, u64, u16);

fn parse_member(m: &[u8]) -> Option<Found> {
    match m.len() {
        14 | 16 => {
            let tag = u16::from_be_bytes([m[4], m[5]]);
            let n = u64::from_be_bytes(m[6..14].try_into().ok()?);
            let p = if m.len() == 16 {
                u16::from_be_bytes([m[14], m[15]])
            } else {
                0
            };
            Some((tag, n, p))
        }
        _ => None,
    }
}

/// An expiry index member: expiry (BE, so that lexical order is time order), tag, id.
fn expiry_member(expires: u64, tag: u16, n: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(18);
    m.extend_from_slice(&expires.to_be_bytes());
    m.extend_from_slice(&tag.to_be_bytes());
    m.extend_from_slice(&n.to_be_bytes());
    m
}

fn record_bytes(id: &str, expires: u64, sig: &Signature) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + Signature::BYTES + id.len());
    out.extend_from_slice(&expires.to_le_bytes());
    out.extend_from_slice(&sig.to_bytes());
    out.extend_from_slice(id.as_bytes());
    out
}

fn parse_record(bytes: &[u8]) -> Option<DocRecord> {
    if bytes.len() < 8 + Signature::BYTES {
        return None;
    }
    let expires = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    let sig: &[u8; Signature::BYTES] = bytes[8..8 + Signature::BYTES].try_into().ok()?;
    let id = std::str::from_utf8(&bytes[8 + Signature::BYTES..]).ok()?;
    Some(DocRecord {
        id: id.to_string(),
        expires,
        signature: Signature::from_bytes(sig),
    })
}

fn paragraphs_bytes(paras: &[(Range<u32>, Signature)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(paras.len() * PARA_BYTES);
    for (span, sig) in paras {
        out.extend_from_slice(&span.start.to_le_bytes());
        out.extend_from_slice(&span.end.to_le_bytes());
        out.extend_from_slice(&sig.to_bytes());
    }
    out
}

fn parse_paragraphs(bytes: &[u8]) -> Option<Vec<(Range<u32>, Signature)>> {
    if !bytes.len().is_multiple_of(PARA_BYTES) {
        return None;
    }
    bytes
        .chunks_exact(PARA_BYTES)
        .map(|c| {
            let start = u32::from_le_bytes(c[0..4].try_into().ok()?);
            let end = u32::from_le_bytes(c[4..8].try_into().ok()?);
            let sig: &[u8; Signature::BYTES] = c[8..].try_into().ok()?;
            Some((start..end, Signature::from_bytes(sig)))
        })
        .collect()
}

fn hex_id(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| u64::from_str_radix(s, 16).ok())
}

/// The value's bytes (`None` for nil).
fn bytes_of(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::Okay => Some(b"OK".to_vec()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

fn list_of(v: Value) -> Vec<Vec<u8>> {
    match v {
        Value::Array(items) | Value::Set(items) => items.into_iter().filter_map(bytes_of).collect(),
        _ => Vec::new(),
    }
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Commits one id, atomically on its slot. KEYS: the id key, then for a put the new
/// record and paragraph keys. ARGV: mode (`put`, `delif`), the internal id (hex: the new
/// one, or for `delif` the one expected), the record and paragraph key prefixes of the
/// tag, and for a put the record and the paragraphs (empty for none). Deletes the record
/// the id held (for `delif`, only if it is the one expected); returns that id, record and
/// paragraphs (empty strings if none).
const COMMIT: &str = r"
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == 'delif' and cur ~= ARGV[2] then
  return {'', '', ''}
end
local old, oldp = '', ''
if cur then
  local dk = ARGV[3] .. cur
  local pk = ARGV[4] .. cur
  old = redis.call('GET', dk) or ''
  oldp = redis.call('GET', pk) or ''
  redis.call('DEL', dk, pk)
end
if ARGV[1] == 'put' then
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[5])
  if ARGV[6] ~= '' then
    redis.call('SET', KEYS[3], ARGV[6])
  end
elseif cur then
  redis.call('DEL', KEYS[1])
end
return {cur or '', old, oldp}
";

/// The connection to the cluster, shared by a store and its readers.
struct Shared {
    client: ClusterClient,
    /// Idle reader connections (each holds one socket per node it has talked to).
    pool: Mutex<Vec<ClusterConnection>>,
    /// The multiplexed connection every check shares (made on first use, in the runtime
    /// of that use: its tasks run there).
    shared_async: Mutex<Option<AsyncConnection>>,
    /// Which primary serves each slot, for the shared connection.
    slots: Mutex<Option<Arc<SlotMap>>>,
    keys: Keys,
    config: DocConfig,
    clock: Arc<dyn Clock>,
    /// What errors name: the seed nodes and namespace.
    target: String,
    /// The last document count read.
    len: AtomicUsize,
}

impl Shared {
    fn error(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError::Remote {
            target: self.target.clone(),
            detail: format!("{what}: {e}"),
        }
    }

    /// The same cluster with other settings (no connection pooled yet).
    fn rebuilt(&self, keys: Keys, config: DocConfig, clock: Arc<dyn Clock>) -> Shared {
        Shared {
            client: self.client.clone(),
            pool: Mutex::new(Vec::new()),
            shared_async: Mutex::new(None),
            slots: Mutex::new(None),
            keys,
            config,
            clock,
            target: self.target.clone(),
            len: AtomicUsize::new(self.len.load(Ordering::Relaxed)),
        }
    }

    fn connect(&self) -> Result<ClusterConnection> {
        self.client
            .get_connection()
            .map_err(|e| self.error("connecting", e))
    }

    /// Runs `f` on a pooled connection; on an error, once more on a new connection (the
    /// cluster's map is read again: a failover or a moved slot).
    fn read<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&mut ClusterConnection) -> std::result::Result<T, RedisError>,
    ) -> Result<T> {
        off_runtime(|| {
            let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut con = match pooled {
                Some(con) => con,
                None => self.connect()?,
            };
            let out = match f(&mut con) {
                Ok(v) => v,
                Err(first) if first.is_unrecoverable_error() || retriable(&first) => {
                    con = self.connect()?;
                    f(&mut con).map_err(|e| self.error(what, e))?
                }
                Err(e) => return Err(self.error(what, e)),
            };
            self.pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(con);
            Ok(out)
        })
    }
}

impl Shared {
    /// The shared multiplexed connection, made if there is none.
    async fn multiplexed(&self) -> Result<AsyncConnection> {
        let cached = self
            .shared_async
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(con) = cached {
            return Ok(con);
        }
        let con = self
            .client
            .get_async_connection()
            .await
            .map_err(|e| self.error("connecting", e))?;
        *self.shared_async.lock().unwrap_or_else(|e| e.into_inner()) = Some(con.clone());
        Ok(con)
    }

    /// Runs `f` on the shared multiplexed connection; on an error, once more on a new
    /// one (the cluster's map read again, or the runtime that ran the old one gone).
    async fn read_async<T, Fut>(
        &self,
        what: &str,
        mut f: impl FnMut(AsyncConnection) -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = std::result::Result<T, RedisError>>,
    {
        let con = self.multiplexed().await?;
        match f(con).await {
            Ok(v) => Ok(v),
            Err(first) if first.is_unrecoverable_error() || retriable(&first) => {
                *self.shared_async.lock().unwrap_or_else(|e| e.into_inner()) = None;
                *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = None;
                let con = self.multiplexed().await?;
                f(con).await.map_err(|e| self.error(what, e))
            }
            Err(e) => Err(self.error(what, e)),
        }
    }
}

impl Shared {
    /// Runs `fut` to completion for a synchronous caller: on the caller's runtime if it is
    /// a multi-threaded one (stepping off its worker meanwhile), else on this module's own.
    fn block_on<T: Send>(&self, fut: impl Future<Output = Result<T>> + Send) -> Result<T> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| h.block_on(fut))
            }
            // A single-threaded runtime cannot be blocked in: wait on another thread.
            Ok(_) => {
                std::thread::scope(
                    |s| match s.spawn(|| self.own_runtime()?.block_on(fut)).join() {
                        Ok(out) => out,
                        Err(panic) => std::panic::resume_unwind(panic),
                    },
                )
            }
            Err(_) => self.own_runtime()?.block_on(fut),
        }
    }

    /// The runtime that runs checks for callers outside any (one thread, for the
    /// process's life: the connection's tasks live on it).
    fn own_runtime(&self) -> Result<&'static tokio::runtime::Runtime> {
        static OWN: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        if let Some(rt) = OWN.get() {
            return Ok(rt);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("neardup-redis")
            .enable_all()
            .build()
            .map_err(|e| self.error("starting the client's runtime", e))?;
        // Of two threads racing here, one runtime is kept; the other is dropped unused.
        let _ = OWN.set(rt);
        OWN.get()
            .ok_or_else(|| self.error("starting the client's runtime", "not kept"))
    }
}

fn retriable(e: &RedisError) -> bool {
    e.is_io_error() || e.is_cluster_error() || e.is_timeout() || e.is_connection_dropped()
}

/// Runs `f`, which waits on the network, off the tokio worker that calls it (if any):
/// the service calls readers from async handlers, and its other requests go on meanwhile.
fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Reads `kind`'s bucket of band `band` for the members with band key `key`.
fn bucket_read(keys: &Keys, kind: Kind, band: usize, key: u32) -> Cmd {
    let mut min = Vec::with_capacity(5);
    min.push(b'[');
    min.extend_from_slice(&key.to_be_bytes());
    let mut max = min.clone();
    max.extend_from_slice(&[0xff; 12]);
    let mut cmd = ::redis::cmd("ZRANGEBYLEX");
    // A crowded key gives its first members only (they sort by a hash of the id, then
    // the internal id), as the band index in memory gives its first
    // (`neardup::batch::RUN_LEADERS`): a template page stored 100,000 times is not read
    // whole by each query. One more is asked for, to tell a crowded key ([`found_in`]).
    cmd.arg(keys.bucket(kind, band, key))
        .arg(min)
        .arg(max)
        .arg("LIMIT")
        .arg(0)
        .arg(RUN_LEADERS + 1);
    cmd
}

/// The bucket reads of each query in `queries` (per query its index keys), and how many
/// each query has.
fn bucket_reads(
    keys: &Keys,
    kind: Kind,
    queries: &[neardup::jaccard::BandKeys],
) -> (Vec<Cmd>, Vec<usize>) {
    let mut cmds = Vec::with_capacity(queries.len() * 20);
    let mut asked = Vec::with_capacity(queries.len());
    for q in queries {
        let before = cmds.len();
        for (band, &key) in q.iter().enumerate() {
            if key != 0 {
                cmds.push(bucket_read(keys, kind, band, key));
            }
        }
        asked.push(cmds.len() - before);
    }
    (cmds, asked)
}

/// The candidates of each query from the replies to its bucket reads: sorted by (internal
/// id, paragraph), each once; and whether each query had a crowded key (a bucket read
/// gave more than [`RUN_LEADERS`] members, of which its first are kept).
fn found_in(replies: Vec<Value>, asked: Vec<usize>) -> Lookups {
    let mut replies = replies.into_iter();
    let mut crowded = Vec::with_capacity(asked.len());
    let found = asked
        .into_iter()
        .map(|n| {
            let mut crowd = false;
            let mut found: Vec<Found> = replies
                .by_ref()
                .take(n)
                .flat_map(|reply| {
                    let mut members = list_of(reply);
                    crowd |= members.len() > RUN_LEADERS;
                    members.truncate(RUN_LEADERS);
                    members
                })
                .filter_map(|m| parse_member(&m))
                .collect();
            found.sort_unstable_by_key(|&(_, n, p)| (n, p));
            found.dedup_by_key(|&mut (_, n, p)| (n, p));
            crowded.push(crowd);
            found
        })
        .collect();
    (found, crowded)
}

/// Per query its candidates ([`found_in`]), and per query whether a key of it was crowded.
type Lookups = (Vec<Vec<Found>>, Vec<bool>);

/// The candidates of each query in `queries` (per query its index keys), from `kind`'s
/// buckets: one pipeline, sorted by (internal id, paragraph), each once.
fn candidates_of(
    keys: &Keys,
    con: &mut ClusterConnection,
    kind: Kind,
    queries: &[neardup::jaccard::BandKeys],
) -> std::result::Result<Lookups, RedisError> {
    let (cmds, asked) = bucket_reads(keys, kind, queries);
    let replies = if cmds.is_empty() {
        Vec::new()
    } else {
        let mut pipe = cluster_pipe();
        for cmd in cmds {
            pipe.add_command(cmd);
        }
        pipe.query::<Vec<Value>>(con)?
    };
    Ok(found_in(replies, asked))
}

/// As [`candidates_of`], on the shared multiplexed connection.
async fn candidates_async(
    shared: &Shared,
    con: &AsyncConnection,
    kind: Kind,
    queries: &[neardup::jaccard::BandKeys],
) -> std::result::Result<Lookups, RedisError> {
    let (cmds, asked) = bucket_reads(&shared.keys, kind, queries);
    Ok(found_in(shared.send_all(con, cmds).await?, asked))
}

/// Which primary serves each hash slot, as the cluster last said (`CLUSTER SLOTS`), so
/// that a round sends each node one pipeline: the cluster client routes a pipeline to one
/// node, and a command on its own costs the client as much as a pipeline does. A stale
/// map costs a retry, never a wrong answer: a node refuses (`MOVED`) keys of slots it
/// does not serve.
struct SlotMap {
    /// Per slot, the index of its primary (`u16::MAX`: unserved).
    node_of: Vec<u16>,
    nodes: usize,
}

const SLOTS: usize = 16384;

impl SlotMap {
    fn parse(v: Value) -> Option<SlotMap> {
        let Value::Array(ranges) = v else {
            return None;
        };
        let mut node_of = vec![u16::MAX; SLOTS];
        let mut nodes: Vec<Vec<u8>> = Vec::new();
        for range in ranges {
            let Value::Array(parts) = range else {
                return None;
            };
            let (Some(start), Some(end), Some(Value::Array(primary))) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                return None;
            };
            let (start, end) = (int_of(start)?, int_of(end)?);
            let (start, end) = (usize::try_from(start).ok()?, usize::try_from(end).ok()?);
            let mut addr = primary.first().cloned().and_then(bytes_of)?;
            addr.push(b':');
            addr.extend(primary.get(1).and_then(int_of)?.to_string().bytes());
            let index = match nodes.iter().position(|n| *n == addr) {
                Some(i) => i,
                None => {
                    nodes.push(addr);
                    nodes.len() - 1
                }
            };
            let index = u16::try_from(index).ok()?;
            for slot in node_of.get_mut(start..=end)? {
                *slot = index;
            }
        }
        Some(SlotMap {
            node_of,
            nodes: nodes.len(),
        })
    }
}

/// The hash slot of `key`, as Redis Cluster computes it (CRC16 of the hash tag, if any).
fn slot_of(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % SLOTS as u16
}

/// The key of a command that has one (its first argument after the name).
fn key_of(cmd: &Cmd) -> &[u8] {
    match cmd.args_iter().nth(1) {
        Some(::redis::Arg::Simple(key)) => key,
        _ => &[],
    }
}

impl Shared {
    /// The slot map, read from the cluster if there is none.
    async fn slot_map(
        &self,
        con: &AsyncConnection,
    ) -> std::result::Result<Arc<SlotMap>, RedisError> {
        let cached = self.slots.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(map) = cached {
            return Ok(map);
        }
        let reply: Value = ::redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut con.clone())
            .await?;
        let map = SlotMap::parse(reply).ok_or_else(|| {
            RedisError::from((
                ::redis::ErrorKind::Parse,
                "CLUSTER SLOTS: an answer not understood",
            ))
        })?;
        let map = Arc::new(map);
        *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&map));
        Ok(map)
    }

    /// Sends `cmds` at once on `con`, one pipeline per primary; their replies, in order.
    /// The client writes the pipelines bound for one node (of this call and of any other
    /// in flight) together, and reads their replies together.
    async fn send_all(
        &self,
        con: &AsyncConnection,
        cmds: Vec<Cmd>,
    ) -> std::result::Result<Vec<Value>, RedisError> {
        use ::redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        let map = self.slot_map(con).await?;
        // Per node: a slot it serves (which routes the pipeline), the pipeline, and the
        // positions of its commands.
        let mut groups: Vec<Option<(u16, ::redis::Pipeline, Vec<usize>)>> =
            (0..=map.nodes).map(|_| None).collect();
        let total = cmds.len();
        for (at, cmd) in cmds.into_iter().enumerate() {
            let slot = slot_of(key_of(&cmd));
            let node = usize::from(map.node_of[usize::from(slot)]).min(map.nodes);
            let (_, pipe, at_list) =
                groups[node].get_or_insert_with(|| (slot, ::redis::pipe(), Vec::new()));
            pipe.add_command(cmd);
            at_list.push(at);
        }
        let sent = groups.into_iter().flatten().map(|(slot, pipe, at_list)| {
            let mut con = con.clone();
            let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
            async move {
                let n = at_list.len();
                let replies = con.route_pipeline(pipe, 0, n, route).await?;
                Ok::<_, RedisError>((at_list, replies))
            }
        });
        let mut out = vec![Value::Nil; total];
        for (at_list, replies) in try_join_all(sent).await? {
            if replies.len() != at_list.len() {
                return Err(RedisError::from((
                    ::redis::ErrorKind::Parse,
                    "a pipeline answered with the wrong number of replies",
                )));
            }
            for (at, reply) in at_list.into_iter().zip(replies) {
                if let Value::ServerError(e) = reply {
                    // MOVED, ASK, CLUSTERDOWN, …: the map is read again on the retry.
                    return Err(RedisError::from(e));
                }
                out[at] = reply;
            }
        }
        Ok(out)
    }
}

/// A document's record and paragraph list, as read (`None`: no such key).
type Records = HashMap<u64, (Option<Vec<u8>>, Option<Vec<u8>>)>;

/// The reads of the records (and with `paragraphs` the paragraph lists) of `docs`.
fn record_reads(keys: &Keys, docs: &[(u16, u64)], paragraphs: bool) -> Vec<Cmd> {
    let mut cmds = Vec::with_capacity(docs.len() * (1 + usize::from(paragraphs)));
    for &(tag, n) in docs {
        cmds.push(::redis::cmd("GET").arg(keys.doc(tag, n)).clone());
        if paragraphs {
            cmds.push(::redis::cmd("GET").arg(keys.paras(tag, n)).clone());
        }
    }
    cmds
}

fn records_in(replies: Vec<Value>, docs: &[(u16, u64)], paragraphs: bool) -> Records {
    let mut replies = replies.into_iter();
    let mut out = HashMap::with_capacity(docs.len());
    for &(_, n) in docs {
        let rec = replies.next().and_then(bytes_of);
        let paras = if paragraphs {
            replies.next().and_then(bytes_of)
        } else {
            None
        };
        out.insert(n, (rec, paras));
    }
    out
}

/// The records (and with `paragraphs` the paragraph lists) of `docs`: one pipeline.
fn records_of(
    keys: &Keys,
    con: &mut ClusterConnection,
    docs: &[(u16, u64)],
    paragraphs: bool,
) -> std::result::Result<Records, RedisError> {
    if docs.is_empty() {
        return Ok(HashMap::new());
    }
    let mut pipe = cluster_pipe();
    for cmd in record_reads(keys, docs, paragraphs) {
        pipe.add_command(cmd);
    }
    Ok(records_in(pipe.query::<Vec<Value>>(con)?, docs, paragraphs))
}

/// As [`records_of`], on the shared multiplexed connection.
async fn records_async(
    shared: &Shared,
    con: &AsyncConnection,
    docs: &[(u16, u64)],
    paragraphs: bool,
) -> std::result::Result<Records, RedisError> {
    let cmds = record_reads(&shared.keys, docs, paragraphs);
    Ok(records_in(
        shared.send_all(con, cmds).await?,
        docs,
        paragraphs,
    ))
}

/// The distinct documents among candidates, by internal id.
fn docs_of<'a>(found: impl IntoIterator<Item = &'a Found>) -> Vec<(u16, u64)> {
    let mut docs: Vec<(u16, u64)> = found.into_iter().map(|&(t, n, _)| (t, n)).collect();
    docs.sort_unstable_by_key(|&(_, n)| n);
    docs.dedup_by_key(|&mut (_, n)| n);
    docs
}

/// The writer of a corpus in a Redis Cluster: applies batches of writes, sweeps expired
/// documents, hands out [`RedisReader`]s. Implements [`crate::Backend`], so `neardup serve`
/// runs over it as over the embedded store.
pub struct RedisStore {
    shared: Arc<Shared>,
    options: RedisOptions,
    /// Matches a put's outcome lists ([`Backend::limit_matches`]).
    max_matches: usize,
    /// The writer's own connection: `WAIT` blocks the connection it is sent on, so
    /// readers do not share it.
    writer: Option<ClusterConnection>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("target", &self.shared.target)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

/// Query handles on a [`RedisStore`]'s corpus, for other threads; cheap to clone.
#[derive(Clone)]
pub struct RedisReader {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RedisReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisReader")
            .field("target", &self.shared.target)
            .finish_non_exhaustive()
    }
}

/// The seed nodes of `urls`: comma-separated, each `redis://host:port` or `host:port`.
fn seeds(urls: &str) -> Vec<String> {
    urls.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.contains("://") {
                s.to_string()
            } else {
                format!("redis://{s}")
            }
        })
        .collect()
}

fn check_namespace(ns: &str) -> std::result::Result<(), String> {
    let ok = !ns.is_empty()
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "namespace {ns:?}: use letters, digits, '_', '-' or '.' (not empty)"
        ))
    }
}

/// Leading bits that split each band into buckets of about 64 documents for `expected`
/// documents (small sorted sets stay compact listpacks in Redis), from 8 to 24.
pub fn bucket_bits_for(expected: u64) -> u32 {
    let per_band = (expected / 64).max(1);
    (64 - per_band.leading_zeros()).clamp(8, 24)
}

impl RedisStore {
    /// Makes a new corpus under `options.namespace` in the cluster reached through the
    /// comma-separated seed nodes `urls`, sized for about `expected` documents (the
    /// buckets' split, fixed from then on). Refused if the namespace holds a corpus.
    pub fn create(
        urls: &str,
        options: RedisOptions,
        config: DocConfig,
        expected: u64,
    ) -> Result<RedisStore> {
        let bits = bucket_bits_for(expected);
        let mut store = RedisStore::connect_with(urls, options, config, bits)?;
        let meta = store.shared.keys.meta();
        let fields: Vec<(&str, u64)> = vec![
            ("format", REDIS_FORMAT),
            ("threshold", config.threshold.get().to_bits()),
            ("paragraphs", u64::from(config.paragraphs)),
            (
                "fingerprint_version",
                u64::from(neardup::fingerprint::VERSION),
            ),
            ("sketch_version", u64::from(SKETCH_VERSION)),
            ("bucket_bits", u64::from(bits)),
        ];
        let shared = Arc::clone(&store.shared);
        let con = store.writer()?;
        // HSETNX on "format" first: of two creates, one wins.
        let won: i64 = ::redis::cmd("HSETNX")
            .arg(&meta)
            .arg("format")
            .arg(REDIS_FORMAT)
            .query(con)
            .map_err(|e| shared.error("creating the corpus", e))?;
        if won == 0 {
            return Err(shared.error(
                "creating the corpus",
                format!(
                    "namespace {:?} already holds a corpus",
                    store.options.namespace
                ),
            ));
        }
        let mut cmd = ::redis::cmd("HSET");
        cmd.arg(&meta);
        for (k, v) in &fields {
            cmd.arg(*k).arg(*v);
        }
        cmd.query::<i64>(con)
            .map_err(|e| shared.error("creating the corpus", e))?;
        store.wait()?;
        Ok(store)
    }

    /// Opens the corpus under `options.namespace`; with `expect`, its settings must be
    /// those.
    pub fn connect(
        urls: &str,
        options: RedisOptions,
        expect: Option<DocConfig>,
    ) -> Result<RedisStore> {
        let mut store = RedisStore::connect_with(urls, options, DocConfig::default(), 8)?;
        let shared = Arc::clone(&store.shared);
        let con = store.writer()?;
        let meta: HashMap<String, u64> = ::redis::cmd("HGETALL")
            .arg(shared.keys.meta())
            .query(con)
            .map_err(|e| shared.error("reading the corpus's settings", e))?;
        let foreign = |detail: String| shared.error("opening the corpus", detail);
        if meta.is_empty() {
            return Err(foreign(format!(
                "no corpus under namespace {:?} (create one first)",
                store.options.namespace
            )));
        }
        let get = |k: &str| {
            meta.get(k)
                .copied()
                .ok_or_else(|| foreign(format!("setting {k:?} is missing")))
        };
        for (k, want) in [
            ("format", REDIS_FORMAT),
            (
                "fingerprint_version",
                u64::from(neardup::fingerprint::VERSION),
            ),
            ("sketch_version", u64::from(SKETCH_VERSION)),
        ] {
            let have = get(k)?;
            if have != want {
                return Err(foreign(other_version(k, have, want)));
            }
        }
        let threshold = Threshold::new(f64::from_bits(get("threshold")?))
            .map_err(|e| foreign(format!("its threshold: {e}")))?;
        let config = DocConfig {
            threshold,
            paragraphs: get("paragraphs")? != 0,
        };
        if let Some(want) = expect {
            if want != config {
                return Err(foreign(format!(
                    "made with threshold {}, paragraphs {}; asked for threshold {}, paragraphs {}",
                    config.threshold, config.paragraphs, want.threshold, want.paragraphs
                )));
            }
        }
        let bits = u32::try_from(get("bucket_bits")?)
            .ok()
            .filter(|b| (1..=24).contains(b))
            .ok_or_else(|| foreign("bucket_bits out of range".into()))?;
        let shared = shared.rebuilt(
            Keys {
                ns: shared.keys.ns.clone(),
                bits,
            },
            config,
            Arc::clone(&shared.clock),
        );
        store.shared = Arc::new(shared);
        store.refresh_len();
        Ok(store)
    }

    fn connect_with(
        urls: &str,
        options: RedisOptions,
        config: DocConfig,
        bits: u32,
    ) -> Result<RedisStore> {
        let nodes = seeds(urls);
        let target = format!("redis cluster {} (namespace {})", nodes.join(","), {
            &options.namespace
        });
        let remote = |detail: String| StoreError::Remote {
            target: target.clone(),
            detail,
        };
        if nodes.is_empty() {
            return Err(remote("no seed node given".into()));
        }
        check_namespace(&options.namespace).map_err(remote)?;
        if options.wait_replicas > 0
            && options.timeout <= options.wait_timeout + Duration::from_millis(100)
        {
            return Err(remote(format!(
                "the command timeout ({:?}) must exceed the replica wait ({:?})",
                options.timeout, options.wait_timeout
            )));
        }
        let client = ClusterClient::builder(nodes)
            .connection_timeout(options.timeout)
            .response_timeout(options.timeout)
            .retries(3)
            .build()
            .map_err(|e| remote(format!("the seed nodes: {e}")))?;
        let shared = Shared {
            client,
            pool: Mutex::new(Vec::new()),
            shared_async: Mutex::new(None),
            slots: Mutex::new(None),
            keys: Keys {
                ns: options.namespace.clone(),
                bits,
            },
            config,
            clock: Arc::new(SystemClock),
            target,
            len: AtomicUsize::new(0),
        };
        let writer = Some(shared.connect()?);
        Ok(RedisStore {
            shared: Arc::new(shared),
            options,
            max_matches: decide::MAX_MATCHES,
            writer,
        })
    }

    /// Uses `clock` for expiry instead of the system clock (for tests: the expiry of
    /// records is decided by this clock; Redis itself expires nothing).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> RedisStore {
        let keys = self.shared.keys.clone();
        self.shared = Arc::new(self.shared.rebuilt(keys, self.shared.config, clock));
        self
    }

    /// The corpus's settings.
    pub fn config(&self) -> DocConfig {
        self.shared.config
    }

    /// Leading bits of a band key that choose its bucket.
    pub fn bucket_bits(&self) -> u32 {
        self.shared.keys.bits
    }

    /// Documents stored (expired ones until swept), as last counted.
    pub fn len(&self) -> usize {
        self.shared.len.load(Ordering::Relaxed)
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A query handle for other threads.
    pub fn reader(&self) -> RedisReader {
        RedisReader {
            shared: Arc::clone(&self.shared),
        }
    }

    fn writer(&mut self) -> Result<&mut ClusterConnection> {
        if self.writer.is_none() {
            self.writer = Some(off_runtime(|| self.shared.connect())?);
        }
        match self.writer.as_mut() {
            Some(con) => Ok(con),
            None => unreachable!("the connection was just made"),
        }
    }

    fn refresh_len(&mut self) {
        let key = self.shared.keys.len();
        if let Ok(con) = self.writer() {
            if let Ok(Some(n)) = ::redis::cmd("GET").arg(key).query::<Option<i64>>(con) {
                self.shared
                    .len
                    .store(usize::try_from(n).unwrap_or(0), Ordering::Relaxed);
            }
        }
    }

    /// Waits until `wait_replicas` replicas of every primary have this connection's
    /// writes.
    fn wait(&mut self) -> Result<()> {
        let want = self.options.wait_replicas;
        if want == 0 {
            return Ok(());
        }
        let ms = self.options.wait_timeout.as_millis() as u64;
        let shared = Arc::clone(&self.shared);
        let con = self.writer()?;
        let got: i64 = ::redis::cmd("WAIT")
            .arg(want)
            .arg(ms)
            .query(con)
            .map_err(|e| shared.error("waiting for the replicas", e))?;
        if got < i64::from(want) {
            return Err(shared.error(
                "waiting for the replicas",
                format!(
                    "a primary's writes reached {got} of the {want} replicas asked for within {ms} ms: not acknowledged"
                ),
            ));
        }
        Ok(())
    }

    /// Applies `writes` in order, as [`crate::DocumentStore::apply`] decides them (each against
    /// the corpus and the batch's earlier writes; `only_if_unique` refused when a
    /// near-duplicate is stored), then waits for the replicas; what each did.
    pub fn apply(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        self.apply_until(writes, None)
    }

    /// As [`RedisStore::apply`], but stops where `at` says, as a writer that dies there:
    /// for tests of what readers see of a half-done batch.
    #[doc(hidden)]
    pub fn apply_interrupted(&mut self, writes: Vec<Write>, at: Interrupt) -> Result<()> {
        self.apply_until(writes, Some(at)).map(|_| ())
    }

    fn apply_until(&mut self, writes: Vec<Write>, stop: Option<Interrupt>) -> Result<Vec<Outcome>> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let result = off_runtime(|| self.apply_inner(writes, stop));
        if result.is_err() {
            // The next batch starts on a new connection, with the cluster's map read again.
            self.writer = None;
        }
        result
    }

    /// Reads the corpus as the batch finds it ([`Before`]), decides the batch
    /// ([`decide::plan`]) and carries the plan out in three phases: the new documents'
    /// bucket members (A), each changed id's commit script (B), the displaced documents'
    /// members (C); then counts and waits for the replicas.
    fn apply_inner(&mut self, writes: Vec<Write>, stop: Option<Interrupt>) -> Result<Vec<Outcome>> {
        let shared = Arc::clone(&self.shared);
        let now = shared.clock.now();
        let max_matches = self.max_matches;
        let con = self.writer()?;
        let before = Before::read(&shared, con, &writes)?;
        let rule = shared.config.rule();
        let plan = decide::plan(&before, rule, now, before.first, max_matches, writes)?;
        index_new(&shared, con, &plan)?;
        if stop == Some(Interrupt::BeforeCommit) {
            return Ok(Vec::new());
        }
        let (puts, displaced) = commit(&shared, con, &plan)?;
        if stop == Some(Interrupt::BeforeCleanup) {
            return Ok(Vec::new());
        }
        let delta = puts as i64 - cleanup(&shared, con, displaced)? as i64;
        self.finish(delta)?;
        Ok(plan.outcomes)
    }

    /// Counts `delta` more documents, then waits for the replicas.
    fn finish(&mut self, delta: i64) -> Result<()> {
        if delta != 0 {
            let shared = Arc::clone(&self.shared);
            let key = shared.keys.len();
            let con = self.writer()?;
            let n: i64 = ::redis::cmd("INCRBY")
                .arg(key)
                .arg(delta)
                .query(con)
                .map_err(|e| shared.error("counting the documents", e))?;
            shared
                .len
                .store(usize::try_from(n).unwrap_or(0), Ordering::Relaxed);
        }
        self.wait()
    }

    /// Deletes every expired document; how many.
    pub fn sweep(&mut self) -> Result<usize> {
        let result = off_runtime(|| self.sweep_inner());
        if result.is_err() {
            self.writer = None;
        }
        result
    }

    fn sweep_inner(&mut self) -> Result<usize> {
        let shared = Arc::clone(&self.shared);
        let keys = &shared.keys;
        let now = shared.clock.now();
        let con = self.writer()?;
        let mut pipe = cluster_pipe();
        let mut max = b"[".to_vec();
        max.extend_from_slice(&now.to_be_bytes());
        max.extend_from_slice(&[0xff; 10]);
        for shard in 0..EXPIRY_SHARDS {
            pipe.cmd("ZRANGEBYLEX")
                .arg(keys.expiry_shard(shard))
                .arg("-")
                .arg(&max);
        }
        let entries: Vec<(u64, u16, u64)> = pipe
            .query::<Vec<Value>>(con)
            .map_err(|e| shared.error("reading the expiry index", e))?
            .into_iter()
            .flat_map(list_of)
            .filter_map(|m| {
                if m.len() != 18 {
                    return None;
                }
                let at = u64::from_be_bytes(m[0..8].try_into().ok()?);
                let tag = u16::from_be_bytes([m[8], m[9]]);
                let n = u64::from_be_bytes(m[10..18].try_into().ok()?);
                Some((at, tag, n))
            })
            .collect();
        if entries.is_empty() {
            return Ok(0);
        }
        let docs: Vec<(u16, u64)> = entries.iter().map(|&(_, t, n)| (t, n)).collect();
        let records = records_of(keys, con, &docs, false)
            .map_err(|e| shared.error("reading the expired", e))?;
        let mut pipe = cluster_pipe();
        let mut ids = Vec::new();
        let mut orphans = cluster_pipe();
        let mut any_orphan = false;
        for &(at, tag, n) in &entries {
            match records
                .get(&n)
                .and_then(|(r, _)| r.as_deref())
                .and_then(parse_record)
            {
                Some(r) if expired(r.expires, now) => {
                    pipe.cmd("EVAL")
                        .arg(COMMIT)
                        .arg(1)
                        .arg(keys.id(tag, &r.id))
                        .arg("delif")
                        .arg(format!("{n:016x}"))
                        .arg(keys.doc_prefix(tag))
                        .arg(keys.para_prefix(tag));
                    ids.push(r.id);
                }
                Some(_) => {}
                // Its document is gone (replaced or deleted by a writer that died before
                // removing the entry): only the entry is left.
                None => {
                    orphans
                        .cmd("ZREM")
                        .arg(keys.expiry(tag))
                        .arg(expiry_member(at, tag, n));
                    any_orphan = true;
                }
            }
        }
        if any_orphan {
            run(con, &orphans).map_err(|e| shared.error("removing stale expiry entries", e))?;
        }
        if ids.is_empty() {
            return Ok(0);
        }
        let displaced = pipe
            .query::<Vec<Value>>(con)
            .map_err(|e| shared.error("deleting the expired", e))?;
        let removed = cleanup(&shared, con, displaced)?;
        self.finish(-(removed as i64))?;
        Ok(removed)
    }

    /// Deletes every key of this corpus (its namespace) from every primary; how many.
    pub fn destroy(mut self) -> Result<usize> {
        let shared = Arc::clone(&self.shared);
        let con = self.writer()?;
        let nodes: String = ::redis::cmd("CLUSTER")
            .arg("NODES")
            .query(con)
            .map_err(|e| shared.error("listing the nodes", e))?;
        let pattern = format!("{}:*", shared.keys.ns);
        let mut deleted = 0;
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 3 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let addr = fields[1].split('@').next().unwrap_or_default();
            let client = ::redis::Client::open(format!("redis://{addr}"))
                .map_err(|e| shared.error(addr, e))?;
            let mut node = client
                .get_connection_with_timeout(self.options.timeout)
                .map_err(|e| shared.error(addr, e))?;
            let mut cursor = 0u64;
            loop {
                let (next, keys): (u64, Vec<Vec<u8>>) = ::redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query(&mut node)
                    .map_err(|e| shared.error(addr, e))?;
                for key in keys {
                    deleted += ::redis::cmd("UNLINK")
                        .arg(key)
                        .query::<usize>(&mut node)
                        .map_err(|e| shared.error(addr, e))?;
                }
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(deleted)
    }
}

/// The corpus as a batch finds it, read in two rounds before anything is written, as
/// the decision needs it ([`StoreView`]): round 1 reads what each id of the batch holds,
/// numbers the batch's puts and reads the candidates of each put (in the corpus as it is
/// before the batch, as the embedded store's index is); round 2 reads the records of the
/// candidates and of the documents the ids hold.
struct Before {
    /// Every id of the batch, and the document it holds.
    ids: HashMap<String, Option<u64>>,
    /// Every put's band keys, and their candidates.
    candidates: HashMap<BandKeys, neardup::corpus::Candidates>,
    /// The records of the candidates and of the documents the ids hold, those that have one.
    records: HashMap<u64, DocRecord>,
    /// The internal id of the batch's first put: the counter reserves one for each put.
    first: u64,
}

impl Before {
    fn read(shared: &Shared, con: &mut ClusterConnection, writes: &[Write]) -> Result<Before> {
        let keys = &shared.keys;
        let mut ids: Vec<&str> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut put_keys = Vec::new();
        for w in writes {
            let id = match w {
                Write::Put { id, doc, .. } => {
                    put_keys.push(doc.signature.index_keys());
                    id
                }
                Write::Delete { id } => id,
            };
            if seen.insert(id.as_str()) {
                ids.push(id);
            }
        }
        let mut pipe = cluster_pipe();
        for id in &ids {
            pipe.get(keys.id(tag_of(id), id));
        }
        if !put_keys.is_empty() {
            pipe.cmd("INCRBY").arg(keys.next()).arg(put_keys.len());
        }
        let mut replies = pipe
            .query::<Vec<Value>>(con)
            .map_err(|e| shared.error("reading the ids", e))?
            .into_iter();
        let mut held: HashMap<String, Option<u64>> = HashMap::with_capacity(ids.len());
        for id in ids {
            let n = replies.next().and_then(bytes_of).and_then(|b| hex_id(&b));
            held.insert(id.to_string(), n);
        }
        // INCRBY gave the last of this batch's internal ids (the first batch's first is 0).
        let first = if put_keys.is_empty() {
            0
        } else {
            let last = replies.next().as_ref().and_then(int_of);
            let last = last.and_then(|l| u64::try_from(l).ok()).ok_or_else(|| {
                shared.error("numbering the documents", "the counter gave no number")
            })?;
            last.saturating_sub(put_keys.len() as u64)
        };
        let (found, crowded) = candidates_of(keys, con, Kind::Docs, &put_keys)
            .map_err(|e| shared.error("reading the buckets", e))?;

        // And what the ids hold: a replaced or deleted document that has expired (not
        // swept yet) is not reported replaced or removed, as a read no longer finds it.
        let mut docs = docs_of(found.iter().flatten());
        docs.extend(held.iter().filter_map(|(id, n)| Some((tag_of(id), (*n)?))));
        docs.sort_unstable_by_key(|&(_, n)| n);
        docs.dedup_by_key(|&mut (_, n)| n);
        let records: HashMap<u64, DocRecord> = records_of(keys, con, &docs, false)
            .map_err(|e| shared.error("reading the candidates", e))?
            .into_iter()
            .filter_map(|(n, (rec, _))| Some((n, parse_record(&rec?)?)))
            .collect();
        let candidates = put_keys
            .into_iter()
            .zip(found.into_iter().zip(crowded))
            .map(|(k, (found, crowded))| {
                let ids = found.into_iter().map(|(_, n, _)| n).collect();
                (k, neardup::corpus::Candidates { ids, crowded })
            })
            .collect();
        Ok(Before {
            ids: held,
            candidates,
            records,
            first,
        })
    }
}

impl StoreView for Before {
    fn id(&self, id: &str) -> Result<Option<u64>> {
        Ok(self.ids.get(id).copied().flatten())
    }

    fn candidates(&self, keys: &BandKeys) -> Result<neardup::corpus::Candidates> {
        Ok(self.candidates.get(keys).cloned().unwrap_or_default())
    }

    fn document(&self, internal: u64) -> Result<Option<DocRecord>> {
        Ok(self.records.get(&internal).cloned())
    }
}

/// The paragraphs of `doc` a store of `config` indexes.
fn indexed(config: DocConfig, doc: &Prepared) -> &[(Range<u32>, Signature)] {
    if config.paragraphs {
        &doc.paragraphs[..doc.paragraphs.len().min(MAX_PARAGRAPHS as usize)]
    } else {
        &[]
    }
}

/// Phase A: the bucket members and expiry entries of the documents `plan` leaves stored.
/// Until their records exist (phase B) no check counts them.
fn index_new(shared: &Shared, con: &mut ClusterConnection, plan: &Plan) -> Result<()> {
    let keys = &shared.keys;
    let mut pipe = cluster_pipe();
    for a in plan.survivors() {
        let tag = tag_of(&a.id);
        let sig = &a.doc.signature;
        let paras = indexed(shared.config, &a.doc);
        index(&mut pipe, keys, "ZADD", tag, a.internal, sig, paras);
        if a.expires != 0 {
            pipe.cmd("ZADD")
                .arg(keys.expiry(tag))
                .arg(0)
                .arg(expiry_member(a.expires, tag, a.internal));
        }
    }
    run(con, &pipe).map_err(|e| shared.error("indexing the new documents", e))
}

/// Phase B: each id `plan` changes, in one script on its slot: the new record put, or the
/// old one deleted (only if the id still holds the one the batch read). How many records
/// were put, and the scripts' replies (what each displaced).
fn commit(
    shared: &Shared,
    con: &mut ClusterConnection,
    plan: &Plan,
) -> Result<(usize, Vec<Value>)> {
    let keys = &shared.keys;
    let mut pipe = cluster_pipe();
    let mut commits = 0usize;
    let mut puts = 0usize;
    for change in plan.changes() {
        let id = change.id;
        let tag = tag_of(id);
        let mut cmd = ::redis::cmd("EVAL");
        cmd.arg(COMMIT);
        match (change.after, change.before) {
            (Some(a), _) => {
                cmd.arg(3)
                    .arg(keys.id(tag, id))
                    .arg(keys.doc(tag, a.internal))
                    .arg(keys.paras(tag, a.internal))
                    .arg("put")
                    .arg(format!("{:016x}", a.internal))
                    .arg(keys.doc_prefix(tag))
                    .arg(keys.para_prefix(tag))
                    .arg(record_bytes(id, a.expires, &a.doc.signature))
                    .arg(paragraphs_bytes(indexed(shared.config, &a.doc)));
                puts += 1;
            }
            (None, Some(o)) => {
                cmd.arg(1)
                    .arg(keys.id(tag, id))
                    .arg("delif")
                    .arg(format!("{o:016x}"))
                    .arg(keys.doc_prefix(tag))
                    .arg(keys.para_prefix(tag));
            }
            (None, None) => continue,
        }
        pipe.add_command(cmd);
        commits += 1;
    }
    let displaced = if commits > 0 {
        pipe.query::<Vec<Value>>(con)
            .map_err(|e| shared.error("committing", e))?
    } else {
        Vec::new()
    };
    Ok((puts, displaced))
}

/// Adds (`ZADD`) or removes (`ZREM`) the bucket members of document `n` and its
/// paragraphs.
fn index(
    pipe: &mut ClusterPipeline,
    keys: &Keys,
    op: &str,
    tag: u16,
    n: u64,
    sig: &Signature,
    paras: &[(Range<u32>, Signature)],
) {
    for (band, &key) in sig.index_keys().iter().enumerate() {
        if key == 0 {
            continue;
        }
        let cmd = pipe.cmd(op).arg(keys.bucket(Kind::Docs, band, key));
        if op == "ZADD" {
            cmd.arg(0);
        }
        cmd.arg(member(key, tag, n, None));
    }
    for (p, (_, s)) in paras.iter().enumerate() {
        for (band, &key) in s.index_keys().iter().enumerate() {
            if key == 0 {
                continue;
            }
            let cmd = pipe.cmd(op).arg(keys.bucket(Kind::Paragraphs, band, key));
            if op == "ZADD" {
                cmd.arg(0);
            }
            cmd.arg(member(key, tag, n, Some(p as u16)));
        }
    }
}

/// Runs `pipe` if it holds commands.
fn run(con: &mut ClusterConnection, pipe: &ClusterPipeline) -> std::result::Result<(), RedisError> {
    if pipe.cmd_iter().next().is_none() {
        return Ok(());
    }
    pipe.query::<Vec<Value>>(con).map(|_| ())
}

/// Phase C: removes the bucket members and expiry entries of the documents the commit
/// scripts displaced (their replies in `displaced`); how many documents they removed.
fn cleanup(shared: &Shared, con: &mut ClusterConnection, displaced: Vec<Value>) -> Result<usize> {
    let keys = &shared.keys;
    let mut pipe = cluster_pipe();
    let mut removed_docs = 0usize;
    for reply in displaced {
        let parts = list_of(reply);
        let [cur, old, oldp] = parts.as_slice() else {
            continue;
        };
        let Some(n) = hex_id(cur) else { continue };
        let Some(rec) = parse_record(old) else {
            continue;
        };
        removed_docs += 1;
        let tag = tag_of(&rec.id);
        let paras = if oldp.is_empty() {
            Vec::new()
        } else {
            parse_paragraphs(oldp).unwrap_or_default()
        };
        index(&mut pipe, keys, "ZREM", tag, n, &rec.signature, &paras);
        if rec.expires != 0 {
            pipe.cmd("ZREM")
                .arg(keys.expiry(tag))
                .arg(expiry_member(rec.expires, tag, n));
        }
    }
    run(con, &pipe).map_err(|e| shared.error("removing the replaced documents' entries", e))?;
    Ok(removed_docs)
}

impl RedisReader {
    /// As [`crate::DocumentStore::check`].
    pub fn check(&self, doc: &Prepared) -> Result<Checked> {
        self.shared.block_on(self.check_async(doc))
    }

    /// As [`RedisReader::check`], waiting for Redis without holding a thread.
    pub async fn check_async(&self, doc: &Prepared) -> Result<Checked> {
        let sig = doc.signature;
        let (found, crowded, records) = self.candidates_and_records(&sig).await?;
        Ok(Checked {
            hits: self.decide(&sig, &found, &records),
            partial: crowded,
        })
    }

    /// As [`crate::DocumentStore::check`] of `text`, the simhash fingerprint computed only
    /// when the text has candidates.
    pub fn check_text(&self, preparer: &Preparer, text: &str) -> Result<Checked> {
        self.shared.block_on(self.check_text_async(preparer, text))
    }

    /// As [`RedisReader::check_text`], waiting for Redis without holding a thread.
    pub async fn check_text_async(&self, preparer: &Preparer, text: &str) -> Result<Checked> {
        let mut sig = preparer.partial(text);
        let (found, crowded, records) = self.candidates_and_records(&sig).await?;
        if found.is_empty() {
            return Ok(Checked::default());
        }
        preparer.complete(&mut sig, text);
        Ok(Checked {
            hits: self.decide(&sig, &found, &records),
            partial: crowded,
        })
    }

    /// The candidates of `sig`, whether a key of it was crowded, and the candidates'
    /// records: two rounds on the shared connection.
    async fn candidates_and_records(&self, sig: &Signature) -> Result<(Vec<Found>, bool, Records)> {
        let shared = &*self.shared;
        let bands = [sig.index_keys()];
        self.shared
            .read_async("checking", |con| async move {
                let (found, crowded) = candidates_async(shared, &con, Kind::Docs, &bands).await?;
                let found: Vec<Found> = found.into_iter().flatten().collect();
                let records = records_async(shared, &con, &docs_of(&found), false).await?;
                Ok((found, crowded.contains(&true), records))
            })
            .await
    }

    /// The check's decision on its candidates: those whose record exists and has not
    /// expired, by the store's rule.
    fn decide(&self, sig: &Signature, found: &[Found], records: &Records) -> Vec<Hit> {
        let now = self.shared.clock.now();
        let mut candidates = Candidates::with_capacity(found.len());
        for &(_, n, _) in found {
            if let Some(r) = records
                .get(&n)
                .and_then(|(r, _)| r.as_deref())
                .and_then(parse_record)
            {
                candidates.stored(n, r, now);
            }
        }
        candidates.decide(self.shared.config.rule(), sig)
    }

    /// As [`crate::DocumentStore::check_paragraphs`].
    pub fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        self.shared.block_on(self.check_paragraphs_async(doc))
    }

    /// As [`RedisReader::check_paragraphs`], waiting for Redis without holding a thread.
    pub async fn check_paragraphs_async(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        if doc.paragraphs.is_empty() || !self.shared.config.paragraphs {
            return Ok(Vec::new());
        }
        let shared = &*self.shared;
        let queries: Vec<_> = doc.paragraphs.iter().map(|(_, s)| s.index_keys()).collect();
        let queries = &queries;
        let (found, records) = self
            .shared
            .read_async("checking paragraphs", |con| async move {
                let (found, _) = candidates_async(shared, &con, Kind::Paragraphs, queries).await?;
                let docs = docs_of(found.iter().flatten());
                let records = records_async(shared, &con, &docs, true).await?;
                Ok((found, records))
            })
            .await?;
        Ok(self.paragraph_hits(&doc.paragraphs, &found, records))
    }

    /// The paragraph check's decision ([`decide::paragraph_hits`]), on records read from
    /// Redis.
    fn paragraph_hits(
        &self,
        paras: &[(Range<u32>, Signature)],
        found: &[Vec<Found>],
        records: Records,
    ) -> Vec<ParagraphHit> {
        let now = self.shared.clock.now();
        let mut stored: HashMap<u64, Option<StoredParagraphs>> = HashMap::new();
        for (n, (rec, list)) in records {
            let live = rec
                .as_deref()
                .and_then(parse_record)
                .filter(|r| !expired(r.expires, now))
                .map(|r| {
                    let list = list
                        .as_deref()
                        .and_then(parse_paragraphs)
                        .unwrap_or_default();
                    (r.id, list)
                });
            stored.insert(n, live);
        }
        let found: Vec<Vec<(u64, usize)>> = found
            .iter()
            .map(|c| c.iter().map(|&(_, n, at)| (n, usize::from(at))).collect())
            .collect();
        decide::paragraph_hits(self.shared.config.rule(), paras, &found, stored)
    }

    /// As [`crate::DocumentStore::get`].
    pub fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        let keys = &self.shared.keys;
        let tag = tag_of(id);
        let now = self.shared.clock.now();
        let got = self.shared.read("reading a document", |con| {
            let Some(n) = ::redis::cmd("GET")
                .arg(keys.id(tag, id))
                .query::<Option<Vec<u8>>>(con)?
                .and_then(|b| hex_id(&b))
            else {
                return Ok(None);
            };
            let mut pipe = cluster_pipe();
            pipe.get(keys.doc(tag, n))
                .cmd("STRLEN")
                .arg(keys.paras(tag, n));
            let (rec, plen): (Option<Vec<u8>>, usize) = pipe.query(con)?;
            Ok(Some((n, rec, plen)))
        })?;
        let Some((n, rec, plen)) = got else {
            return Ok(None);
        };
        let Some(rec) = rec else {
            // The id and its record change together: the id was replaced or deleted
            // between the two reads.
            return Ok(None);
        };
        let r = parse_record(&rec).ok_or_else(|| {
            self.shared.error(
                "reading a document",
                format!("the record of document {n} ({id:?}) is damaged"),
            )
        })?;
        if expired(r.expires, now) {
            return Ok(None);
        }
        Ok(Some(StoredDoc {
            id: id.to_string(),
            signature: r.signature,
            expires: (r.expires != 0).then_some(r.expires),
            paragraphs: plen / PARA_BYTES,
        }))
    }

    /// Documents stored (expired ones until swept), as of now.
    pub fn len(&self) -> usize {
        let key = self.shared.keys.len();
        if let Ok(Some(n)) = self.shared.read("counting", |con| {
            ::redis::cmd("GET").arg(&key).query::<Option<i64>>(con)
        }) {
            self.shared
                .len
                .store(usize::try_from(n).unwrap_or(0), Ordering::Relaxed);
        }
        self.shared.len.load(Ordering::Relaxed)
    }

    /// Whether no document is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The corpus's settings.
    pub fn config(&self) -> DocConfig {
        self.shared.config
    }
}

impl Backend for RedisStore {
    type Reader = RedisReader;

    fn limit_matches(&mut self, n: usize) {
        self.max_matches = n;
    }

    fn reader(&self) -> RedisReader {
        RedisStore::reader(self)
    }

    fn apply(&mut self, writes: Vec<Write>) -> Result<Vec<Outcome>> {
        RedisStore::apply(self, writes)
    }

    fn sweep(&mut self) -> Result<usize> {
        RedisStore::sweep(self)
    }

    fn len(&self) -> usize {
        RedisStore::len(self)
    }

    fn config(&self) -> DocConfig {
        RedisStore::config(self)
    }
}

impl BackendReader for RedisReader {
    fn check(&self, doc: &Prepared) -> Result<Checked> {
        RedisReader::check(self, doc)
    }

    fn check_text(&self, preparer: &Preparer, text: &str) -> Result<Checked> {
        RedisReader::check_text(self, preparer, text)
    }

    fn check_text_async<'a>(
        &'a self,
        preparer: &'a Preparer,
        text: &'a str,
    ) -> impl Future<Output = Result<Checked>> + Send + 'a {
        RedisReader::check_text_async(self, preparer, text)
    }

    fn check_paragraphs(&self, doc: &Prepared) -> Result<Vec<ParagraphHit>> {
        RedisReader::check_paragraphs(self, doc)
    }

    fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        RedisReader::get(self, id)
    }

    fn len(&self) -> usize {
        RedisReader::len(self)
    }

    fn config(&self) -> DocConfig {
        RedisReader::config(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_maps_read_cluster_slots() {
        let node = |port: i64| {
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |a: i64, b: i64, port: i64| {
            Value::Array(vec![
                Value::Int(a),
                Value::Int(b),
                node(port),
                node(port + 3),
            ])
        };
        let reply = Value::Array(vec![
            range(0, 99, 7000),
            range(100, 16383, 7001),
            range(200, 300, 7000),
        ]);
        let map = SlotMap::parse(reply).map(|m| (m.nodes, m.node_of));
        let (nodes, of) = map.unwrap_or_default();
        assert_eq!(nodes, 2);
        assert_eq!(
            (of[0], of[99], of[100], of[250], of[16383]),
            (0, 0, 1, 0, 1)
        );
        assert!(SlotMap::parse(Value::Array(vec![range(0, 16384, 7000)])).is_none());
        assert!(SlotMap::parse(Value::Int(1)).is_none());
    }

    #[test]
    fn members_are_exact_bytes_and_order_by_key() {
        let m = member(u32::MAX, 0xabcd, u64::MAX - 1, None);
        assert_eq!(parse_member(&m), Some((0xabcd, u64::MAX - 1, 0)));
        let p = member(7, 1, 1 << 60, Some(4095));
        assert_eq!(parse_member(&p), Some((1, 1 << 60, 4095)));
        // Lexical order of members is the order of their band keys.
        assert!(member(1, 0xffff, u64::MAX, None) < member(2, 0, 0, None));
        assert!(expiry_member(9, 0xffff, u64::MAX) < expiry_member(10, 0, 0));
    }

    #[test]
    fn records_round_trip() {
        let sig = Signature {
            text_hash: u64::MAX,
            ..Signature::default()
        };
        let r = parse_record(&record_bytes("a/ü{x}", 1 << 62, &sig));
        let r = r.as_ref();
        assert_eq!(r.map(|r| r.id.as_str()), Some("a/ü{x}"));
        assert_eq!(r.map(|r| r.expires), Some(1 << 62));
        assert_eq!(r.map(|r| r.signature), Some(sig));
        assert!(parse_record(b"short").is_none());
        let paras = vec![(3..9, sig), (10..20, Signature::default())];
        assert_eq!(parse_paragraphs(&paragraphs_bytes(&paras)), Some(paras));
    }

    #[test]
    fn buckets_split_by_leading_bits_in_one_slot() {
        let keys = Keys {
            ns: "t".into(),
            bits: 12,
        };
        assert_eq!(keys.bucket(Kind::Docs, 3, 0xabcd_ef01), "t:b:{03abc}");
        assert_eq!(
            keys.bucket(Kind::Paragraphs, 19, 0x0000_0001),
            "t:q:{13000}"
        );
        assert_eq!(keys.doc(0x00ff, 5), "t:d:{00ff}:0000000000000005");
        assert_eq!(bucket_bits_for(0), 8);
        assert_eq!(bucket_bits_for(1_000_000_000), 24);
        assert_eq!(bucket_bits_for(1_000_000), 14);
        assert_eq!(
            seeds("redis://a:1, b:2,"),
            vec!["redis://a:1".to_string(), "redis://b:2".to_string()]
        );
        assert!(check_namespace("nd-1.x_y").is_ok());
        // As `CLUSTER KEYSLOT` of Redis 7.0 answers.
        for (key, slot) in [
            ("somekey", 11058),
            ("foo{hash_tag}", 2515),
            ("a{}b", 13694),
            ("{}{x}", 3257),
            ("x{y", 2740),
            ("neardup:b:{03abc}", 9741),
        ] {
            assert_eq!(slot_of(key.as_bytes()), slot, "{key}");
        }
        let mut get = ::redis::cmd("GET");
        get.arg(keys.doc(0x00ff, 5));
        assert_eq!(key_of(&get), b"t:d:{00ff}:0000000000000005");
        assert!(check_namespace("a{b}").is_err() && check_namespace("").is_err());
    }
}

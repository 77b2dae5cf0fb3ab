//! `neardup serve`: the HTTP service over a document store (see `neardup-server`).

use std::time::Duration;

use anyhow::anyhow;
use neardup::jaccard::Threshold;
use neardup_server::ServerConfig;
use neardup_store::{Backend, DocConfig, DocumentStore, OpenOptions, Opened, StoreError};

use crate::doc_args::parse_threshold;
use crate::failure::{store_failure, Failure};
use crate::output::refuse_overwrite;
use crate::redis::RedisArgs;

/// Settings of `neardup serve`.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("store").required(true).args(["data", "redis"])))]
pub struct ServeCmd {
    /// The store's data directory (the embedded store, on this machine).
    #[arg(long, value_name = "DIR")]
    data: Option<String>,
    #[command(flatten)]
    redis: RedisArgs,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Make a new store in --data (or a new corpus under --redis-namespace) first, with
    /// --threshold and --paragraphs.
    #[arg(long)]
    create: bool,
    /// With --create: documents at or above this estimated Jaccard similarity of their word
    /// 5-shingle sets are near-duplicates, as `neardup dedup --threshold` decides.
    #[arg(long, requires = "create", value_parser = parse_threshold)]
    threshold: Option<Threshold>,
    /// With --create: index paragraphs too, for `"paragraphs": true` checks.
    #[arg(long, requires = "create")]
    paragraphs: bool,
    /// With --redis and --create: documents expected, which fixes how finely each band is
    /// split into buckets in Redis.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1_000_000,
        requires = "redis"
    )]
    expected: u64,
    /// Require `Authorization: Bearer <token>` on every /v1 request, the token being this
    /// file's content (without its trailing newline).
    #[arg(long, value_name = "FILE")]
    token_file: Option<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    body_limit: usize,
    /// Bytes of request bodies over 64 KB held at once, over all connections (e.g. 256M):
    /// such a request waits for room before its body is read, and is answered 503 if none
    /// comes within --body-timeout. Bounds what clients sending large bodies can make the
    /// service hold; smaller bodies (most checks) are read at once.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = crate::find::parse_size)]
    body_memory: u64,
    /// Seconds between sweeps of expired documents.
    #[arg(long, default_value_t = 60)]
    sweep_every: u64,
    /// Seconds between snapshots of the in-memory index (written beside the store while
    /// the service runs, when it changed, so that the next start reads it instead of
    /// rebuilding it); 0 for only when the service stops.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    snapshot_every: u64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// With --data: save the database's allocator state with every checkpoint (redb's
    /// quick-repair, a second fsync per checkpoint), so that a start after a crash need
    /// not walk the whole file to rebuild it. `false` saves that fsync, at the price of
    /// that walk (minutes at 100M documents) after each crash.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    quick_repair: bool,
    /// With --data: milliseconds acknowledged writes may wait in the write-ahead log
    /// (each batch fsynced there) before one durable commit of the database takes them
    /// all. Longer: fewer checkpoints, a longer replay after a crash.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    checkpoint_every: u64,
    /// With --data: megabytes of the database's page cache (default 1024). Checks and
    /// writes read the stored documents' pages through it; a store larger than it reads
    /// them from the kernel, one system call a page.
    #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    cache_mb: Option<u64>,
    /// With --data: memory the service may use, its page cache (--cache-mb) and request
    /// bodies (--body-memory, and 64 KB a connection) included, e.g. 12G. The start
    /// refuses a store whose index would not fit (before reading it, rather than
    /// swapping), and a write whose new documents would not fit is answered 507 (nothing
    /// of it stored); /metrics reports the store's budget (what the bodies leave) and what
    /// the store needs of it.
    #[arg(long, value_name = "SIZE", value_parser = crate::find::parse_size)]
    memory: Option<u64>,
    /// Seconds a connection has to send a request's head, from its start or the end of
    /// its previous answer (idle keep-alive connections close after it too).
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    header_timeout: Duration,
    /// Seconds a request has to send its whole body (408 after it).
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    body_timeout: Duration,
    /// Open connections at most; at the cap a new one takes the place of the oldest idle
    /// one (answering no request), or waits until one closes when none is idle
    /// [default: 1024, or fewer to stay 64 below the open-file limit].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
    /// Matches listed per answer, most similar first; "more_matches" counts the rest.
    #[arg(long, value_name = "N", default_value_t = 100)]
    max_matches: usize,
    /// Items per bulk request (413 beyond).
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_bulk_items: u64,
    /// Bytes of a document id (422 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    max_id_bytes: u64,
}

/// Seconds, whole or not, as a duration of at least a millisecond.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let seconds: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(0.001..=86_400.0 * 365.0).contains(&seconds) {
        return Err(format!("{s} s is not between 0.001 s and a year"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Tokens shorter than this start the service with a warning: guessable.
const SHORT_TOKEN: usize = 16;

/// The token of `path`: the file's one line, without its line ending. Refused, so that
/// the service never starts with a token no client can send or anyone can change: an
/// empty one, one with white space in it (two lines, a trailing space), one in a file
/// every user may write.
fn read_token(path: &str) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::input(anyhow!("cannot read the token file '{path}': {e}")))?;
    let token = text
        .strip_suffix('\n')
        .map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
    if token.is_empty() {
        return Err(Failure::input(anyhow!("the token file '{path}' is empty")));
    }
    if let Some(c) = token.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(Failure::input(anyhow!(
            "the token file '{path}' holds {c:?}: a token is one line without spaces, which \
             a client could never send as 'Authorization: Bearer <token>'"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| Failure::input(anyhow!("cannot read the token file '{path}': {e}")))?
            .permissions()
            .mode();
        if mode & 0o002 != 0 {
            return Err(Failure::input(anyhow!(
                "the token file '{path}' is writable by every user (mode {:o}): chmod o-w it",
                mode & 0o777
            )));
        }
    }
    if token.chars().count() < SHORT_TOKEN {
        crate::note!(
            "neardup serve: warning: the token in '{path}' has fewer than {SHORT_TOKEN} characters"
        );
    }
    Ok(token.to_string())
}

/// The connection cap: as asked, or 1024; and never within 64 of the open-file limit, so
/// that `accept` keeps descriptors for the store's files and the connections it holds.
fn max_connections(asked: Option<u64>) -> usize {
    let mut cap = asked.unwrap_or(1024);
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given, nothing else.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            let room = limit.rlim_cur.saturating_sub(64).max(1);
            if cap > room {
                if asked.is_some() {
                    crate::note!(
                        "neardup serve: warning: --max-connections {cap} lowered to {room}, 64 below the open-file limit ({})",
                        limit.rlim_cur
                    );
                }
                cap = room;
            }
        }
    }
    usize::try_from(cap).unwrap_or(usize::MAX)
}

/// Blocks of 1 MiB and more straight from the kernel and back to it when freed, unless
/// the environment sets `MALLOC_MMAP_THRESHOLD_` itself. glibc otherwise raises that
/// threshold to the size of each large block freed (up to 32 MiB), so the band index's
/// arrays, freed at each rebuild of its main part, came back from the heap and were kept
/// there: five minutes of mixed load at 1.9M stored ended at 1,417 MB resident, 852 MB
/// with the threshold fixed (docs/service.md). For the same reason the server's large
/// blocks are not backed by huge pages, as the batch jobs' are (`memory`).
fn return_large_blocks() {
    crate::memory::huge_pages(false);
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt sets an allocator parameter and nothing else; this runs before
        // the server starts its threads.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
    }
}

/// Runs `neardup serve` until SIGTERM or SIGINT, then finishes the requests in flight.
pub fn run(cmd: &ServeCmd) -> Result<(), Failure> {
    return_large_blocks();
    let token = match &cmd.token_file {
        Some(path) => {
            // The store is written for as long as the service runs: a token read from
            // its own file would be written over (and change under a restart).
            if let Some(dir) = &cmd.data {
                let store = std::path::Path::new(dir).join(neardup_store::FILE);
                refuse_overwrite(
                    &[("the store", &store.to_string_lossy())],
                    &[("the token file", path)],
                )?;
            }
            Some(read_token(path)?)
        }
        None => None,
    };
    if cmd.sweep_every == 0 {
        return Err(Failure::input(anyhow!(
            "--sweep-every must be at least 1 second"
        )));
    }
    let config = ServerConfig {
        token,
        body_limit: cmd.body_limit,
        body_memory: usize::try_from(cmd.body_memory).unwrap_or(usize::MAX),
        sweep_every: Duration::from_secs(cmd.sweep_every),
        snapshot_every: (cmd.snapshot_every > 0).then(|| Duration::from_secs(cmd.snapshot_every)),
        header_timeout: cmd.header_timeout,
        body_timeout: cmd.body_timeout,
        max_connections: max_connections(cmd.max_connections),
        max_matches: cmd.max_matches,
        max_bulk_items: usize::try_from(cmd.max_bulk_items).unwrap_or(usize::MAX),
        max_id_bytes: usize::try_from(cmd.max_id_bytes).unwrap_or(usize::MAX),
        ..ServerConfig::default()
    };
    let create = cmd.create.then(|| DocConfig {
        threshold: cmd.threshold.unwrap_or_default(),
        paragraphs: cmd.paragraphs,
    });
    match &cmd.data {
        Some(dir) => {
            let started = std::time::Instant::now();
            let options = OpenOptions {
                cache_bytes: cmd.cache_mb.and_then(|mb| usize::try_from(mb << 20).ok()),
                memory_budget: cmd.memory.map(|m| store_share(m, &config)).transpose()?,
                rebuild_in_place: false,
            };
            let mut store = match create {
                Some(c) => DocumentStore::create_with(dir, c, options),
                None => DocumentStore::open_with(dir, None, options),
            }
            .map_err(|e| match (e, cmd.memory) {
                (e @ StoreError::Memory { .. }, Some(m)) => Failure::input(anyhow!(
                    "{e} (--memory {} MB, less {} MB for request bodies)",
                    m >> 20,
                    (neardup_server::bodies_memory(&config) as u64).div_ceil(1 << 20)
                )),
                (e, _) => store_failure(e),
            })?
            .with_quick_repair(cmd.quick_repair)
            .with_checkpoint_every(std::time::Duration::from_millis(cmd.checkpoint_every));
            // The replay's writes, and the quick-repair setting, durable before serving.
            store.checkpoint().map_err(store_failure)?;
            let took = started.elapsed().as_secs_f64();
            if store.repaired() {
                crate::note!(
                    "neardup serve: the store was not closed cleanly; its database file was repaired by reading all of it (--quick-repair true makes the next repair quick)"
                );
            }
            match store.opened() {
                Opened::Created => {}
                Opened::Snapshot { caught_up } => crate::note!(
                    "neardup serve: index built from the band keys and ids read from the snapshot in {took:.1} s ({caught_up} documents added or removed since)"
                ),
                Opened::Rebuilt { why } => crate::note!(
                    "neardup serve: index built from the band keys and ids read from the stored documents in {took:.1} s ({why})"
                ),
            }
            if store.replayed() > 0 {
                crate::note!(
                    "neardup serve: {} batches of acknowledged writes replayed from the write-ahead log",
                    store.replayed()
                );
            }
            if cmd.memory.is_none() {
                if let Some(warning) = crate::find::machine_memory()
                    .and_then(|machine| unbounded_memory_warning(store.memory_needed(), machine))
                {
                    crate::note!("{warning}");
                }
            }
            run_on(cmd, store, dir, config)
        }
        None => {
            let store = cmd.redis.open(create, cmd.expected)?;
            let place = cmd.redis.describe();
            run_on(cmd, store, &place, config)
        }
    }
}

/// Without `--memory` nothing bounds the store: a warning when its model's need (the
/// index's main part twice, for a rebuild beside the old, levels, id map, page cache)
/// is more than the machine's RAM, since the next rebuild may then be killed for memory
/// where a budget would have answered the writes 507.
fn unbounded_memory_warning(needed: u64, machine: u64) -> Option<String> {
    (needed > machine).then(|| {
        format!(
            "neardup serve: warning: the store needs {} MB of memory by its model (the index, \
             as much again for a rebuild of its main part beside the old, recent writes, the \
             id map and the page cache), more than this machine's {} MB, and no --memory \
             bounds it: a rebuild may be killed for memory. With --memory, writes that would \
             not fit are answered 507 instead",
            needed >> 20,
            machine >> 20
        )
    })
}

/// The store's share of `--memory`: what is left after the request bodies'
/// ([`neardup_server::bodies_memory`]); an error when nothing is.
fn store_share(memory: u64, config: &ServerConfig) -> Result<u64, Failure> {
    let bodies = neardup_server::bodies_memory(config) as u64;
    match memory.checked_sub(bodies) {
        Some(left) if left > 0 => Ok(left),
        _ => Err(Failure::input(anyhow!(
            "--memory {} MB leaves nothing for the store after the request bodies' {} MB \
             (--body-memory, and 64 KB for each of {} connections): raise --memory, or lower \
             --body-memory or --max-connections",
            memory >> 20,
            bodies.div_ceil(1 << 20),
            config.max_connections
        ))),
    }
}

/// Serves `store` (found at `place`, for messages) until SIGTERM or SIGINT.
fn run_on<B: Backend>(
    cmd: &ServeCmd,
    store: B,
    place: &str,
    config: ServerConfig,
) -> Result<(), Failure> {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cmd.threads {
        runtime.worker_threads(n.max(1));
    }
    let runtime = runtime
        .enable_all()
        .build()
        .map_err(|e| Failure::io(anyhow!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&cmd.listen)
            .await
            .map_err(|e| Failure::input(anyhow!("cannot listen on {}: {e}", cmd.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::io(anyhow!("{e}")))?;
        let settings = store.config();
        crate::note!(
            "neardup serve: {} documents in {} (threshold {}, paragraphs {}), listening on http://{addr}",
            store.len(),
            place,
            settings.threshold,
            if settings.paragraphs { "on" } else { "off" },
        );
        let store = neardup_server::serve(listener, store, config, stop_signal())
            .await
            .map_err(|e| Failure::io(anyhow!("{e}")))?;
        crate::note!("neardup serve: stopped; {} documents", store.len());
        Ok(())
    })
}

/// Resolves on SIGTERM or SIGINT.
async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

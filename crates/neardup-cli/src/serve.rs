//! `neardup serve`: the HTTP service over a document store (see `neardup-server`).

use std::time::Duration;

use anyhow::anyhow;
use neardup::jaccard::Threshold;
use neardup_server::ServerConfig;
use neardup_store::{DocConfig, DocStore, StoreError};

use crate::failure::Failure;

/// Settings of `neardup serve`.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeCmd {
    /// The store's data directory.
    #[arg(long, value_name = "DIR")]
    data: String,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Make a new store in --data first (with --threshold and --paragraphs).
    #[arg(long)]
    create: bool,
    /// With --create: documents at or above this estimated Jaccard similarity of their word
    /// 5-shingle sets are near-duplicates, as `neardup dedup --threshold` decides.
    #[arg(long, requires = "create", value_parser = parse_threshold)]
    threshold: Option<Threshold>,
    /// With --create: index paragraphs too, for `"paragraphs": true` checks.
    #[arg(long, requires = "create")]
    paragraphs: bool,
    /// Require `Authorization: Bearer <token>` on every /v1 request, the token being this
    /// file's content (without its trailing newline).
    #[arg(long, value_name = "FILE")]
    token_file: Option<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    body_limit: usize,
    /// Seconds between sweeps of expired documents.
    #[arg(long, default_value_t = 60)]
    sweep_every: u64,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

fn parse_threshold(s: &str) -> Result<Threshold, String> {
    s.parse().map_err(|e: neardup::Error| e.to_string())
}

fn store_failure(e: StoreError) -> Failure {
    match e {
        StoreError::Io { .. } | StoreError::Db { .. } => Failure::io(e),
        _ => Failure::input(e),
    }
}

/// Runs `neardup serve` until SIGTERM or SIGINT, then finishes the requests in flight.
pub fn run(cmd: &ServeCmd) -> Result<(), Failure> {
    let token = match &cmd.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::input(anyhow!("cannot read the token file '{path}': {e}")))?;
            let token = text.trim_end_matches(['\n', '\r']).to_string();
            if token.is_empty() {
                return Err(Failure::input(anyhow!("the token file '{path}' is empty")));
            }
            Some(token)
        }
        None => None,
    };
    if cmd.sweep_every == 0 {
        return Err(Failure::input(anyhow!(
            "--sweep-every must be at least 1 second"
        )));
    }
    let store = if cmd.create {
        let config = DocConfig {
            threshold: cmd.threshold.unwrap_or_default(),
            paragraphs: cmd.paragraphs,
        };
        DocStore::create(&cmd.data, config).map_err(store_failure)?
    } else {
        DocStore::open(&cmd.data, None).map_err(store_failure)?
    };
    let config = ServerConfig {
        token,
        body_limit: cmd.body_limit,
        sweep_every: Duration::from_secs(cmd.sweep_every),
    };
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
        eprintln!(
            "neardup serve: {} documents in {} (threshold {}, paragraphs {}), listening on http://{addr}",
            store.len(),
            cmd.data,
            settings.threshold,
            if settings.paragraphs { "on" } else { "off" },
        );
        let store = neardup_server::serve(listener, store, config, stop_signal())
            .await
            .map_err(|e| Failure::io(anyhow!("{e}")))?;
        eprintln!("neardup serve: stopped; {} documents", store.len());
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

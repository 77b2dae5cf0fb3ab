//! The writer: one thread owns the store and applies writes in batches. Requests queue
//! while a batch commits; the next batch takes all of them (group commit: one transaction
//! and one fsync for many requests), and each request hears its outcome only after the
//! fsync that covers it.

use std::sync::Arc;
use std::time::Instant;

use neardup_store::{Backend, Outcome, StoreError, Write};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

/// Most writes one transaction takes.
const MAX_BATCH: usize = 8192;

/// What the writer is asked.
pub(crate) enum Job {
    /// Writes, applied in order, in the same transaction as other jobs' writes.
    Writes(Vec<Write>, oneshot::Sender<Result<Vec<Outcome>, String>>),
    /// Delete the expired documents.
    Sweep(oneshot::Sender<Result<usize, String>>),
}

/// Runs the writer until every sender is gone, then returns the store.
pub(crate) fn run<B: Backend>(
    mut store: B,
    mut jobs: mpsc::Receiver<Job>,
    metrics: Arc<Metrics>,
) -> B {
    while let Some(first) = jobs.blocking_recv() {
        let mut batch = vec![first];
        let mut writes = match &batch[0] {
            Job::Writes(w, _) => w.len(),
            Job::Sweep(_) => 0,
        };
        while writes < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => {
                    if let Job::Writes(w, _) = &job {
                        writes += w.len();
                    }
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        let mut all = Vec::with_capacity(writes);
        let mut waiting = Vec::new();
        for job in batch {
            match job {
                Job::Writes(w, reply) => {
                    waiting.push((w.len(), reply));
                    all.extend(w);
                }
                Job::Sweep(reply) => {
                    let started = Instant::now();
                    let swept = store.sweep().map_err(describe);
                    metrics.sweep(swept.as_ref().ok().copied(), started.elapsed());
                    let _ = reply.send(swept);
                }
            }
        }
        if waiting.is_empty() {
            continue;
        }
        let started = Instant::now();
        let result = store.apply(all);
        metrics.commit(writes, started.elapsed());
        metrics.documents.set(store.len() as i64);
        match result {
            Ok(outcomes) => {
                let mut outcomes = outcomes.into_iter();
                for (n, reply) in waiting {
                    let _ = reply.send(Ok(outcomes.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                let message = describe(e);
                for (_, reply) in waiting {
                    let _ = reply.send(Err(message.clone()));
                }
            }
        }
    }
    store
}

fn describe(e: StoreError) -> String {
    e.to_string()
}

//! The writer: one thread owns the store and applies writes in batches. Requests queue
//! while a batch commits; the next batch takes all of them (group commit: one transaction
//! and one fsync for many requests), and each request hears its outcome only after the
//! fsync that covers it.
//!
//! Now and then, and when the service stops, the writer also snapshots the store's
//! in-memory indexes (a few `Arc`s taken between batches, written by another thread while
//! writes go on), so that the next start reads them instead of rebuilding them.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use neardup_store::{Backend, Outcome, SnapshotJob, StoreError, Write};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

/// Most writes one transaction takes.
const MAX_BATCH: usize = 8192;

/// Why writes failed: what happened, and whether they may have been stored.
#[derive(Clone, Debug)]
pub(crate) struct WriteFailure {
    /// What failed.
    pub(crate) message: String,
    /// The writes may be durable (the next start applies them if so).
    pub(crate) unsure: bool,
    /// Refused: their documents would not fit the store's memory budget.
    pub(crate) memory: bool,
}

/// The store's failure, once it takes no more writes: set by the writer, read by
/// `/healthz`, and the service stops on it.
#[derive(Default)]
pub(crate) struct Failure {
    reason: std::sync::OnceLock<String>,
    stop: tokio::sync::Notify,
}

impl Failure {
    /// Why the store failed, if it did.
    pub(crate) fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }

    /// Records the failure (the first one stays) and wakes [`Failure::stopped`].
    fn set(&self, reason: String) {
        let _ = self.reason.set(reason);
        self.stop.notify_one();
    }

    /// Resolves once the store has failed.
    pub(crate) async fn stopped(&self) {
        if self.reason().is_none() {
            self.stop.notified().await;
        }
    }
}

/// What the writer is asked.
pub(crate) enum Job {
    /// Writes, applied in order, in the same transaction as other jobs' writes.
    Writes(
        Vec<Write>,
        oneshot::Sender<Result<Vec<Outcome>, WriteFailure>>,
    ),
    /// Delete the expired documents.
    Sweep(oneshot::Sender<Result<usize, String>>),
    /// Start a snapshot of the indexes, unless one is being written.
    Snapshot,
}

/// A snapshot being written on its own thread.
type InFlight = (
    JoinHandle<Result<(), StoreError>>,
    Arc<SnapshotJob>,
    Instant,
);

/// Starts writing a snapshot of `store` if there is something new to write.
fn start_snapshot<B: Backend>(store: &mut B, metrics: &Metrics) -> Option<InFlight> {
    if !store.snapshot_due() {
        return None;
    }
    match store.begin_snapshot() {
        Ok(Some(job)) => {
            let job = Arc::new(job);
            let writing = Arc::clone(&job);
            let started = Instant::now();
            match std::thread::Builder::new()
                .name("neardup-snapshot".into())
                .spawn(move || writing.write())
            {
                Ok(handle) => Some((handle, job, started)),
                Err(_) => {
                    metrics.snapshot(false, started.elapsed());
                    None
                }
            }
        }
        Ok(None) => None,
        Err(_) => {
            metrics.snapshot(false, Default::default());
            None
        }
    }
}

/// Waits for the snapshot `in_flight`, and tells the store it is written.
fn finish_snapshot<B: Backend>(store: &mut B, in_flight: InFlight, metrics: &Metrics) {
    let (handle, job, started) = in_flight;
    let written = matches!(handle.join(), Ok(Ok(())));
    let ok = written && store.snapshot_written(&job).is_ok();
    metrics.snapshot(ok, started.elapsed());
}

/// Runs the writer until every sender is gone, then returns the store.
pub(crate) fn run<B: Backend>(
    mut store: B,
    mut jobs: mpsc::Receiver<Job>,
    metrics: Arc<Metrics>,
    failure: Arc<Failure>,
) -> B {
    let mut in_flight: Option<InFlight> = None;
    while let Some(first) = jobs.blocking_recv() {
        if in_flight.as_ref().is_some_and(|f| f.0.is_finished()) {
            if let Some(done) = in_flight.take() {
                finish_snapshot(&mut store, done, &metrics);
            }
        }
        let mut batch = vec![first];
        let mut writes = match &batch[0] {
            Job::Writes(w, _) => w.len(),
            Job::Sweep(_) | Job::Snapshot => 0,
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
                    let swept = store.sweep().map_err(|e| describe(&e));
                    metrics.sweep(swept.as_ref().ok().copied(), started.elapsed());
                    let _ = reply.send(swept);
                    if let Some(reason) = store.failure() {
                        failure.set(reason);
                    }
                }
                Job::Snapshot => {
                    if in_flight.is_none() {
                        in_flight = start_snapshot(&mut store, &metrics);
                    }
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
        set_memory(&store, &metrics);
        match result {
            Ok(outcomes) => {
                let mut outcomes = outcomes.into_iter();
                for (n, reply) in waiting {
                    let _ = reply.send(Ok(outcomes.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                let failed = WriteFailure {
                    message: describe(&e),
                    unsure: !e.stored_nothing(),
                    memory: matches!(e, StoreError::Memory { .. }),
                };
                for (_, reply) in waiting {
                    let _ = reply.send(Err(failed.clone()));
                }
                // A store that failed takes nothing more until it is opened again: say
                // so, and let the service stop for a supervisor to start it again.
                if let Some(reason) = store.failure() {
                    failure.set(reason);
                }
            }
        }
    }
    // Stopping: the last snapshot is the state every acknowledged write left.
    if let Some(done) = in_flight.take() {
        finish_snapshot(&mut store, done, &metrics);
    }
    if let Some(last) = start_snapshot(&mut store, &metrics) {
        finish_snapshot(&mut store, last, &metrics);
    }
    store
}

/// The memory gauges, from the store.
pub(crate) fn set_memory<B: Backend>(store: &B, metrics: &Metrics) {
    let (needed, budget) = store.memory();
    metrics
        .memory_needed
        .set(i64::try_from(needed).unwrap_or(i64::MAX));
    metrics
        .memory_budget
        .set(budget.map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX)));
}

fn describe(e: &StoreError) -> String {
    e.to_string()
}

//! Work whose CPU grows with a request's size (signing long texts, bulk requests), kept
//! from crowding out the small requests.
//!
//! Such work runs on threads of its own, one a core, at a lower scheduling priority
//! (nice [`neardup::LOWER_NICE`] on Linux): when small checks and long texts compete for
//! the cores, the small ones get them first, and the long ones take what is left. A
//! client sending 60 KB texts that NFKC expands 11-fold on eight connections took the
//! checks of 32 other connections from 25,700 to 7,800 a second on two cores when such
//! texts were signed on the async workers; now to 20,900 (docs/reliability.md).
//!
//! At most one such work a core runs or waits for a thread at once ([`Heavy::run`]'s
//! permits), the rest waiting without one, so at most that many hold the buffers signing
//! makes (32 checks of 2 MB of U+FDFA at once took the server to 5.6 GB); a request whose
//! client hangs up before its turn never runs.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use tokio::sync::{oneshot, Semaphore};

use crate::error::ApiError;

/// The threads and permits of heavy work.
pub(crate) struct Heavy {
    permits: Arc<Semaphore>,
    pool: rayon::ThreadPool,
}

impl Heavy {
    /// `threads` threads at nice [`neardup::LOWER_NICE`], and as many permits.
    pub(crate) fn new(threads: usize) -> std::io::Result<Heavy> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("neardup-heavy-{i}"))
            .start_handler(|_| neardup::lower_priority())
            .build()
            .map_err(std::io::Error::other)?;
        Ok(Heavy {
            permits: Arc::new(Semaphore::new(threads)),
            pool,
        })
    }

    /// One a core.
    pub(crate) fn per_core() -> std::io::Result<Heavy> {
        Heavy::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Runs `work` on a heavy thread once a permit is free; a panic in it is an internal
    /// error of this request, not of the service.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|e| ApiError::internal(format!("the permits of heavy work: {e}")))?;
        let (done, result) = oneshot::channel();
        self.pool.spawn(move || {
            let out = std::panic::catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|_| Err(ApiError::internal("heavy work panicked")));
            // The permit goes with the work, so a client that hangs up frees it only
            // when the work ends.
            drop(permit);
            // The request may be gone; its answer with it.
            let _ = done.send(out);
        });
        result
            .await
            .map_err(|_| ApiError::internal("heavy work ended without an answer"))?
    }
}

//! The core's only contact with threads: parallel map when the `rayon` feature is on, a
//! plain loop when it is off. Results come back in input order either way, so output does
//! not depend on the feature or the thread count. And work that nobody waits for runs at a
//! lower priority ([`in_background`]).

/// The nice value of work that nobody waits for: an index's rebuilds in the background,
/// the freeing of what they replace, a server's long requests. With the other threads at
/// 0, Linux's scheduler gives such threads about a tenth of a contended core.
pub const LOWER_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to nice [`LOWER_NICE`] (a thread's own
/// on Linux; nothing elsewhere).
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority reads only its integer arguments; `who` 0 is the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, LOWER_NICE);
    }
}

/// The calling thread's nice value, where the system has one per thread (Linux).
pub fn thread_nice() -> Option<i32> {
    #[cfg(target_os = "linux")]
    // SAFETY: as above; errno is cleared first because -1 is also a valid answer.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        (*libc::__errno_location() == 0).then_some(nice)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// `f` at nice [`LOWER_NICE`], its parallel work ([`map`], [`join`]) on threads of a
/// pool of its own at that priority, for work that nobody waits for: when it competes
/// with requests for the cores, the requests get them. Lowers the calling thread's
/// priority too, so call it from a thread of its own.
pub(crate) fn in_background<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    lower_priority();
    #[cfg(feature = "rayon")]
    {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("neardup-background-{i}"))
            .start_handler(|_| lower_priority())
            .build();
        // Without a pool of its own (no thread to be had), on the shared one as before.
        if let Ok(pool) = pool {
            return pool.install(f);
        }
    }
    f()
}

/// Threads that [`map`] may use.
#[cfg(feature = "rayon")]
pub(crate) fn threads() -> usize {
    rayon::current_num_threads()
}

/// Threads that [`map`] may use.
#[cfg(not(feature = "rayon"))]
pub(crate) fn threads() -> usize {
    1
}

/// `f` over every item, in parallel when possible; results in input order.
#[cfg(feature = "rayon")]
pub(crate) fn map<T, R, F>(items: Vec<T>, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync + Send,
{
    use rayon::prelude::*;
    items.into_par_iter().map(f).collect()
}

/// `f` over every item, in parallel when possible; results in input order.
#[cfg(not(feature = "rayon"))]
pub(crate) fn map<T, R, F>(items: Vec<T>, f: F) -> Vec<R>
where
    F: Fn(T) -> R,
{
    items.into_iter().map(f).collect()
}

/// `a` and `b`, side by side when possible.
#[cfg(feature = "rayon")]
pub(crate) fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    rayon::join(a, b)
}

/// `a` and `b`, side by side when possible.
#[cfg(not(feature = "rayon"))]
pub(crate) fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB,
{
    (a(), b())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Background work and its parallel parts run at the lower priority; the caller's
    /// other threads keep theirs; the results are those of the same work in the
    /// foreground.
    #[test]
    fn background_work_runs_at_the_lower_priority() {
        let before = thread_nice();
        let (result, nices) = std::thread::spawn(|| {
            in_background(|| {
                let items: Vec<u64> = (0..64).collect();
                let out = map(items, |i| (i * i, thread_nice()));
                let (a, b) = join(thread_nice, thread_nice);
                let squares: Vec<u64> = out.iter().map(|o| o.0).collect();
                let mut nices: Vec<Option<i32>> = out.iter().map(|o| o.1).collect();
                nices.extend([a, b, thread_nice()]);
                (squares, nices)
            })
        })
        .join()
        .unwrap();
        assert_eq!(result, (0..64u64).map(|i| i * i).collect::<Vec<_>>());
        if cfg!(target_os = "linux") {
            assert!(nices.iter().all(|&n| n == Some(LOWER_NICE)), "{nices:?}");
            assert_eq!(thread_nice(), before);
        } else {
            assert!(nices.iter().all(|n| n.is_none()));
        }
    }
}

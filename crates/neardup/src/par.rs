//! The core's only contact with threads: parallel map when the `rayon` feature is on, a
//! plain loop when it is off. Results come back in input order either way, so output does
//! not depend on the feature or the thread count.

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

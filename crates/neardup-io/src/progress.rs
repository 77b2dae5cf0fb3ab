//! How far a reader has come, told to whoever draws it (the CLI's progress bar).

/// Told the phases of a read and the units done in each (bytes of input). Reading a large
/// input calls it every batch, from the reading thread: it should be cheap.
pub trait Progress: Sync {
    /// A phase called `name` starts, of `total` units when known.
    fn phase(&self, name: &'static str, total: Option<u64>);

    /// Units of the current phase done so far.
    fn set(&self, done: u64);
}

/// Progress told to no one.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn phase(&self, _: &'static str, _: Option<u64>) {}

    fn set(&self, _: u64) {}
}

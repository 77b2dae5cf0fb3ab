//! Catching the panics of a third-party reader, for the readers that panic on some damaged
//! files instead of returning an error.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Inside [`catch_panic`] on this thread: a panic is caught, its report not printed.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, a panic inside it turned into `Err` with the panic's message (and not
/// reported on standard error): for third-party readers that panic on some damaged files
/// instead of returning an error (the parquet crate's record reader). Only for code whose
/// state is dropped with the error.
pub(crate) fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(Cell::get) {
                report(info);
            }
        }));
    });
    let outer = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into())
    })
}

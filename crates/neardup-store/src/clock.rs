//! Time, in Unix seconds, and what a time to live makes of it. The clock is injectable so
//! that expiry can be tested without waiting.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The time, in Unix seconds: injectable, so expiry can be tested without waiting.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// When a document put at `now` with `ttl` expires, as stored: 0 for never. Whole
/// seconds, rounded up, so a document never expires before its time; a zero ttl is
/// expired at once (and 1 stands for it at time 0, as 0 means never). At most
/// `i64::MAX`, which the API's schema says an expiry fits in (a ttl of `i64::MAX`
/// seconds was stored as 9223372038650798556).
pub(crate) fn expires_at(now: u64, ttl: Option<Duration>) -> u64 {
    ttl.map_or(0, |t| {
        now.saturating_add(t.as_secs())
            .saturating_add(u64::from(t.subsec_nanos() > 0))
            .clamp(1, i64::MAX as u64)
    })
}

/// Whether an expiry (0 for none) has passed at `now`.
pub(crate) fn expired(expires: u64, now: u64) -> bool {
    expires != 0 && expires <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_to_whole_seconds_and_zero_is_never() {
        assert_eq!(expires_at(100, None), 0);
        assert_eq!(expires_at(100, Some(Duration::from_secs(5))), 105);
        assert_eq!(expires_at(100, Some(Duration::from_millis(4_001))), 105);
        assert_eq!(expires_at(100, Some(Duration::ZERO)), 100);
        assert_eq!(expires_at(0, Some(Duration::ZERO)), 1);
        assert!(expired(expires_at(100, Some(Duration::ZERO)), 100));
        assert!(!expired(0, u64::MAX));
        assert!(!expired(105, 104));
    }
}

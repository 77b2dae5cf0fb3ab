//! CPU features, detected once, and the level of instructions the kernels may use.
//!
//! Every kernel of the core that has a faster version for some CPUs asks [`features`]
//! which to run, as memchr does: the CPU is probed on the first call and the answer kept
//! in an atomic, so a dispatch costs a load, not a `cpuid`. Every version gives the same
//! results bit for bit (the tests compare each level with [`Level::Scalar`]); only the
//! speed differs.
//!
//! The levels, from the lowest:
//!
//! - [`Level::Scalar`]: no kernel chosen at run time, only the instructions the build
//!   targets (on x86-64 that includes SSE2, and whatever `target-cpu` the build sets:
//!   this workspace builds for x86-64-v2, so POPCNT and SSE4.2).
//! - [`Level::Avx2`]: AVX2 where the CPU has it. The core has no AVX2 kernels today, so
//!   this level runs exactly what [`Level::Scalar`] runs: it means "no AVX-512 kernels".
//! - [`Level::Avx512`]: the AVX-512 kernels, each where the CPU has the parts of AVX-512
//!   it needs (F; F and BW; F and DQ; or F, DQ and BW).
//!
//! # Lowering the level
//!
//! The environment variable `NEARDUP_CPU` is read once, with the CPU's features, and can
//! only lower the level: `scalar`, `avx2` or `avx512` (ASCII case and surrounding white
//! space ignored). Asking for more than the CPU has gives what it has (`avx512` on a CPU
//! without AVX-512 is its own level). Any other value, or none, leaves the CPU's level:
//! an unknown value is ignored, never an error or a panic, since a library must not stop
//! a program over its environment; a program that wants to warn about it can check
//! [`env_ignored`]. To measure or test one level inside a process, [`with_level`] lowers it
//! for a closure on the calling thread.
//!
//! ```
//! use neardup::arch::{self, Level};
//!
//! let best = arch::level();
//! let plain = arch::with_level(Level::Scalar, || {
//!     assert_eq!(arch::level(), Level::Scalar);
//!     neardup::fingerprint::simhash(&[1, 2, 3])
//! });
//! assert_eq!(plain, neardup::fingerprint::simhash(&[1, 2, 3]));
//! assert!(arch::level() == best);
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// The instructions the kernels may use, from the lowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The build's own instructions only.
    Scalar,
    /// AVX2 (the core has no AVX2 kernels: the same code as [`Level::Scalar`]).
    Avx2,
    /// The AVX-512 kernels.
    Avx512,
}

impl Level {
    /// Every level, from the lowest.
    pub const ALL: [Level; 3] = [Level::Scalar, Level::Avx2, Level::Avx512];

    /// The name `NEARDUP_CPU` gives the level: `scalar`, `avx2` or `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }

    /// The level named `name` (ASCII case and surrounding white space ignored), if any.
    pub fn from_name(name: &str) -> Option<Level> {
        let name = name.trim();
        Level::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(name))
    }

    fn code(self) -> u32 {
        self as u32
    }

    fn of_code(code: u32) -> Level {
        match code {
            0 => Level::Scalar,
            1 => Level::Avx2,
            _ => Level::Avx512,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of CPU features: what a CPU has ([`cpu`]), or what the kernels may use at the
/// current level ([`features`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Features(u32);

const AVX2: u32 = 1;
const AVX512F: u32 = 1 << 1;
const AVX512BW: u32 = 1 << 2;
const AVX512DQ: u32 = 1 << 3;
const AVX512VBMI: u32 = 1 << 4;
const AVX512VBMI2: u32 = 1 << 5;
const POPCNT: u32 = 1 << 6;
const AVX512_ALL: u32 = AVX512F | AVX512BW | AVX512DQ | AVX512VBMI | AVX512VBMI2;

impl Features {
    /// AVX2.
    #[inline]
    pub fn avx2(self) -> bool {
        self.0 & AVX2 != 0
    }

    /// AVX-512 Foundation.
    #[inline]
    pub fn avx512f(self) -> bool {
        self.0 & AVX512F != 0
    }

    /// AVX-512 byte and word instructions (with F).
    #[inline]
    pub fn avx512bw(self) -> bool {
        self.0 & AVX512BW != 0
    }

    /// AVX-512 doubleword and quadword instructions (with F).
    #[inline]
    pub fn avx512dq(self) -> bool {
        self.0 & AVX512DQ != 0
    }

    /// AVX-512 byte permutes (VBMI, with F and BW).
    #[inline]
    pub fn avx512vbmi(self) -> bool {
        self.0 & AVX512VBMI != 0
    }

    /// AVX-512 byte compress and expand (VBMI2, with F and BW).
    #[inline]
    pub fn avx512vbmi2(self) -> bool {
        self.0 & AVX512VBMI2 != 0
    }

    /// POPCNT (the build's baseline may lack it).
    #[inline]
    pub fn popcnt(self) -> bool {
        self.0 & POPCNT != 0
    }

    /// The highest level these features reach.
    pub fn level(self) -> Level {
        if self.avx512f() {
            Level::Avx512
        } else if self.avx2() {
            Level::Avx2
        } else {
            Level::Scalar
        }
    }

    /// These features less those above `level`.
    #[inline]
    pub fn at_most(self, level: Level) -> Features {
        Features(match level {
            Level::Scalar => 0,
            Level::Avx2 => self.0 & !AVX512_ALL,
            Level::Avx512 => self.0,
        })
    }
}

/// The cache: the CPU's features in the low bits, the level `NEARDUP_CPU` asks for above
/// them, and a bit saying it is filled (0 before the first call).
static CACHE: AtomicU32 = AtomicU32::new(0);
const FILLED: u32 = 1 << 31;
const ENV_SHIFT: u32 = 8;
/// `NEARDUP_CPU` set to something that is not a level.
const ENV_UNKNOWN: u32 = 1 << 12;

/// The variable that lowers the level.
pub const ENV: &str = "NEARDUP_CPU";

thread_local! {
    /// The level [`with_level`] set on this thread, as its code; [`NO_OVERRIDE`] if none.
    static OVERRIDE: Cell<u32> = const { Cell::new(NO_OVERRIDE) };
}
const NO_OVERRIDE: u32 = u32::MAX;

#[inline]
fn cache() -> u32 {
    let word = CACHE.load(Ordering::Relaxed);
    if word & FILLED != 0 {
        word
    } else {
        fill()
    }
}

/// Probes the CPU and reads `NEARDUP_CPU`. Threads that race here compute the same word.
#[cold]
fn fill() -> u32 {
    let cpu = probe();
    let env = std::env::var(ENV).ok();
    let (level, unknown) = match env.as_deref().map(str::trim) {
        None | Some("") => (Level::Avx512, 0),
        Some(name) => match Level::from_name(name) {
            Some(level) => (level, 0),
            None => (Level::Avx512, ENV_UNKNOWN),
        },
    };
    let word = FILLED | unknown | level.code() << ENV_SHIFT | cpu.0;
    CACHE.store(word, Ordering::Relaxed);
    word
}

#[cfg(target_arch = "x86_64")]
fn probe() -> Features {
    let mut f = 0;
    let mut set = |on: bool, bit: u32| {
        if on {
            f |= bit;
        }
    };
    set(std::arch::is_x86_feature_detected!("avx2"), AVX2);
    set(std::arch::is_x86_feature_detected!("avx512f"), AVX512F);
    set(std::arch::is_x86_feature_detected!("avx512bw"), AVX512BW);
    set(std::arch::is_x86_feature_detected!("avx512dq"), AVX512DQ);
    set(
        std::arch::is_x86_feature_detected!("avx512vbmi"),
        AVX512VBMI,
    );
    set(
        std::arch::is_x86_feature_detected!("avx512vbmi2"),
        AVX512VBMI2,
    );
    set(std::arch::is_x86_feature_detected!("popcnt"), POPCNT);
    Features(f)
}

#[cfg(not(target_arch = "x86_64"))]
fn probe() -> Features {
    Features(0)
}

/// What the CPU has, whatever the level.
pub fn cpu() -> Features {
    Features(cache() & 0xff)
}

/// The features the kernels may use on this thread now: the CPU's, lowered by
/// `NEARDUP_CPU` or [`with_level`].
#[inline]
pub fn features() -> Features {
    let word = cache();
    Features(word & 0xff).at_most(cap(word))
}

/// The level the kernels run at on this thread now: the CPU's, lowered by `NEARDUP_CPU`
/// or [`with_level`].
pub fn level() -> Level {
    features().level()
}

/// The highest level the kernels may use, before the CPU's features are taken in.
#[inline]
fn cap(word: u32) -> Level {
    match OVERRIDE.with(Cell::get) {
        NO_OVERRIDE => Level::of_code(word >> ENV_SHIFT & 0xf),
        code => Level::of_code(code),
    }
}

/// Whether `NEARDUP_CPU` held a value that is not a level, and so was ignored: a program
/// may want to say so.
pub fn env_ignored() -> bool {
    cache() & ENV_UNKNOWN != 0
}

/// Whether the kernels may use AVX-512BW on this thread now.
pub fn has_avx512bw() -> bool {
    features().avx512bw()
}

/// Runs `f` with the kernels of this thread at `level` at most (and at most what the CPU
/// has), in place of what `NEARDUP_CPU` says; other threads, and work `f` hands to them
/// (a rayon pool), keep their own level. For tests and measurements: the results are the
/// same at every level.
pub fn with_level<R>(level: Level, f: impl FnOnce() -> R) -> R {
    /// Puts the previous override back, also when `f` panics.
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(level.code())));
    f()
}

/// The levels this CPU can run, from the lowest: [`Level::Scalar`] and every level up to
/// [`cpu`]'s.
pub fn levels() -> Vec<Level> {
    let top = cpu().level();
    Level::ALL.into_iter().filter(|&l| l <= top).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_lowering() {
        for level in Level::ALL {
            assert_eq!(Level::from_name(level.name()), Some(level));
        }
        assert_eq!(Level::from_name(" AVX512\n"), Some(Level::Avx512));
        assert_eq!(Level::from_name("sse9"), None);
        assert_eq!(Level::from_name(""), None);
        let all = Features(AVX2 | AVX512_ALL);
        assert_eq!(all.level(), Level::Avx512);
        assert_eq!(all.at_most(Level::Avx2).level(), Level::Avx2);
        assert!(!all.at_most(Level::Avx2).avx512bw());
        assert_eq!(all.at_most(Level::Scalar), Features::default());
    }

    #[test]
    fn with_level_lowers_on_this_thread_only() {
        let best = cpu().level();
        with_level(Level::Scalar, || {
            assert_eq!(level(), Level::Scalar);
            assert!(!features().avx512f() && !features().avx2());
            // Nested, and never above the CPU.
            with_level(Level::Avx512, || assert_eq!(level(), best));
            assert_eq!(level(), Level::Scalar);
            let other = std::thread::spawn(|| OVERRIDE.with(Cell::get))
                .join()
                .unwrap();
            assert_eq!(other, NO_OVERRIDE);
        });
        assert!(levels().contains(&Level::Scalar));
        assert_eq!(levels().last(), Some(&best));
    }
}

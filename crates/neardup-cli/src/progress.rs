//! Progress on a terminal: a bar per phase, drawn only when standard error is a terminal
//! and only once the job has run for a few seconds, so quick runs and pipes stay clean.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a job runs before its progress appears.
const DELAY: Duration = Duration::from_secs(2);

/// A delayed progress bar; all methods are cheap no-ops when it is disabled. Clones
/// draw the same bar.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    enabled: bool,
    /// Set once the job is over, so a late timer does not draw a finished bar.
    finished: Arc<Mutex<bool>>,
}

impl Progress {
    /// A bar that appears after a few seconds when standard error is a terminal.
    pub fn for_stderr() -> Progress {
        let p = Progress::new(std::io::stderr().is_terminal());
        if p.enabled {
            let (bar, finished) = (p.bar.clone(), p.finished.clone());
            std::thread::spawn(move || {
                std::thread::sleep(DELAY);
                let finished = finished.lock().unwrap_or_else(|e| e.into_inner());
                if !*finished {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    bar.enable_steady_tick(Duration::from_millis(200));
                }
            });
        }
        p
    }

    /// A bar that never draws.
    pub fn hidden() -> Progress {
        Progress::new(false)
    }

    fn new(enabled: bool) -> Progress {
        Progress {
            bar: ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()),
            enabled,
            finished: Arc::new(Mutex::new(false)),
        }
    }

    /// Starts a phase named `name`, of `total` units when known (a spinner otherwise).
    pub fn phase(&self, name: &'static str, total: Option<u64>) {
        if !self.enabled {
            return;
        }
        let style = match total {
            Some(_) => ProgressStyle::with_template(
                "{msg:>9} [{bar:40}] {percent:>3}%  {elapsed_precise} (eta {eta})",
            ),
            None => ProgressStyle::with_template("{msg:>9} {spinner} {elapsed_precise}"),
        };
        if let Ok(style) = style {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_message(name);
        self.bar.set_length(total.unwrap_or(0));
        self.bar.set_position(0);
    }

    /// Units of the current phase done so far.
    pub fn set(&self, done: u64) {
        if self.enabled {
            self.bar.set_position(done);
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if self.enabled {
            let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
            *finished = true;
            self.bar.finish_and_clear();
        }
    }
}

/// The readers of `neardup-io` draw this bar.
impl neardup_io::Progress for Progress {
    fn phase(&self, name: &'static str, total: Option<u64>) {
        Progress::phase(self, name, total);
    }

    fn set(&self, done: u64) {
        Progress::set(self, done);
    }
}

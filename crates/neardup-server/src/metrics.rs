//! Prometheus metrics: requests and their latency by route and status, documents stored,
//! memory, commits (fsyncs) and the writes they carried, expiry sweeps.

use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

/// The service's metrics, in their own registry.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    /// Documents stored.
    pub documents: IntGauge,
    /// Bytes of memory the store needs now, as its budget counts them (0 without one).
    pub memory_needed: IntGauge,
    /// The store's memory budget in bytes (0: none).
    pub memory_budget: IntGauge,
    resident: IntGauge,
    written: IntGauge,
    commits: IntCounter,
    committed_writes: IntCounter,
    commit_seconds: Histogram,
    sweeps: IntCounter,
    swept: IntCounter,
    snapshots: IntCounterVec,
    snapshot_seconds: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

impl Metrics {
    /// New metrics, all zero.
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "neardup_requests_total",
                "HTTP requests by route and status",
            ),
            &["route", "method", "status"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "neardup_request_seconds",
                "HTTP request latency by route and status",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["route", "method", "status"],
        )?;
        let documents = IntGauge::new("neardup_documents", "Documents stored")?;
        let resident = IntGauge::new("neardup_resident_bytes", "Resident memory of the process")?;
        let written = IntGauge::new(
            "neardup_disk_written_bytes",
            "Bytes the process has caused to be written to storage since it started \
             (write_bytes of /proc/self/io; 0 where there is none)",
        )?;
        let memory_needed = IntGauge::new(
            "neardup_memory_needed_bytes",
            "Memory the store needs as its budget counts it: index, its rebuild, page cache",
        )?;
        let memory_budget = IntGauge::new(
            "neardup_memory_budget_bytes",
            "Memory the store may use (--memory; 0: no budget)",
        )?;
        let commits = IntCounter::new(
            "neardup_commits_total",
            "Transactions committed with fsync (each covers a batch of writes)",
        )?;
        let committed_writes = IntCounter::new(
            "neardup_committed_writes_total",
            "Writes (puts and deletes) committed",
        )?;
        let commit_seconds = Histogram::with_opts(
            HistogramOpts::new("neardup_commit_seconds", "Time to apply and fsync a batch")
                .buckets(LATENCY_BUCKETS.to_vec()),
        )?;
        let sweeps = IntCounter::new("neardup_sweeps_total", "Expiry sweeps run")?;
        let swept = IntCounter::new("neardup_swept_total", "Expired documents deleted by sweeps")?;
        let snapshots = IntCounterVec::new(
            Opts::new(
                "neardup_snapshots_total",
                "Snapshots of the indexes written, by outcome",
            ),
            &["outcome"],
        )?;
        let snapshot_seconds = Histogram::with_opts(
            HistogramOpts::new("neardup_snapshot_seconds", "Time to write a snapshot")
                .buckets(vec![0.01, 0.1, 1.0, 5.0, 15.0, 60.0, 300.0]),
        )?;
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(latency.clone()),
            Box::new(documents.clone()),
            Box::new(resident.clone()),
            Box::new(written.clone()),
            Box::new(memory_needed.clone()),
            Box::new(memory_budget.clone()),
            Box::new(commits.clone()),
            Box::new(committed_writes.clone()),
            Box::new(commit_seconds.clone()),
            Box::new(sweeps.clone()),
            Box::new(swept.clone()),
            Box::new(snapshots.clone()),
            Box::new(snapshot_seconds.clone()),
        ] {
            registry.register(c)?;
        }
        Ok(Metrics {
            registry,
            requests,
            latency,
            documents,
            resident,
            written,
            memory_needed,
            memory_budget,
            commits,
            committed_writes,
            commit_seconds,
            sweeps,
            swept,
            snapshots,
            snapshot_seconds,
        })
    }

    /// Counts a request. Every label comes from a fixed set, whatever the client sends:
    /// `route` is a route's pattern or one of the service's own words ("unmatched",
    /// "unauthorized"), the method one of HTTP's nine or "other", the status a number
    /// of three digits, so no request makes a new series.
    pub fn request(&self, route: &str, method: &str, status: u16, took: Duration) {
        let code = axum::http::StatusCode::from_u16(status).ok();
        let status = code
            .as_ref()
            .map_or("other", axum::http::StatusCode::as_str);
        let labels = [route, method_label(method), status];
        self.requests.with_label_values(&labels).inc();
        self.latency
            .with_label_values(&labels)
            .observe(took.as_secs_f64());
    }

    /// Counts a commit of `writes` writes.
    pub fn commit(&self, writes: usize, took: Duration) {
        self.commits.inc();
        self.committed_writes.inc_by(writes as u64);
        self.commit_seconds.observe(took.as_secs_f64());
    }

    /// Counts a sweep (and what it deleted, when it worked).
    pub fn sweep(&self, swept: Option<usize>, _took: Duration) {
        self.sweeps.inc();
        if let Some(n) = swept {
            self.swept.inc_by(n as u64);
        }
    }

    /// Counts a snapshot written (or one that failed), and its time.
    pub fn snapshot(&self, written: bool, took: Duration) {
        let outcome = if written { "written" } else { "failed" };
        self.snapshots.with_label_values(&[outcome]).inc();
        if written {
            self.snapshot_seconds.observe(took.as_secs_f64());
        }
    }

    /// The metrics in Prometheus's text format.
    pub fn render(&self) -> String {
        if let Some(rss) = resident_bytes() {
            self.resident.set(rss as i64);
        }
        // What the writes cost the disk: at 30M documents a put of 2 KB wrote 58 KB of
        // copied B-tree pages (docs/service.md), which no other metric shows.
        if let Some(bytes) = written_bytes() {
            self.written.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail but for a metric family the encoder rejects.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// The resident set of this process, from /proc (Linux); `None` elsewhere.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// The bytes this process has caused to be written to storage, from /proc (Linux);
/// `None` elsewhere.
fn written_bytes() -> Option<u64> {
    write_bytes_in(&std::fs::read_to_string("/proc/self/io").ok()?)
}

/// The `write_bytes` field of a `/proc/<pid>/io` text.
fn write_bytes_in(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|line| line.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// `method` as a metric label: HTTP's methods by name, anything else "other".
fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    KNOWN.into_iter().find(|&m| m == method).unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_bytes_is_read_from_its_own_line() {
        let io = "rchar: 5386454329\nwchar: 6965199219\nsyscr: 554941\nsyscw: 2023705\n\
                  read_bytes: 0\nwrite_bytes: 6862696448\ncancelled_write_bytes: 4096\n";
        assert_eq!(write_bytes_in(io), Some(6_862_696_448));
        // The cancelled bytes are another field, not a match.
        assert_eq!(write_bytes_in("cancelled_write_bytes: 4096\n"), None);
        assert_eq!(write_bytes_in("write_bytes: lots\n"), None);
        assert_eq!(write_bytes_in(""), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_gauge_shows_what_proc_says_at_the_render() {
        use std::io::Write;
        // Bytes written to storage first, where the file system counts them.
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[7u8; 1 << 16]).unwrap();
        file.sync_all().unwrap();
        let m = Metrics::new().unwrap();
        let before = written_bytes();
        let rendered = m.render();
        let after = written_bytes();
        let line = rendered
            .lines()
            .find(|l| l.starts_with("neardup_disk_written_bytes "))
            .unwrap();
        let shown: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        if let (Some(before), Some(after)) = (before, after) {
            assert!(
                before <= shown && shown <= after,
                "{before} <= {shown} <= {after}"
            );
        }
    }
}

//! What the fuzz targets share: a scratch directory for inputs that only exist as files
//! (the readers take paths), in memory when the system has `/dev/shm`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// This process's scratch directory, removed when the process ends normally; those of
/// processes that ended otherwise (a finding aborts) are removed by the next one.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        remove_dead(&base);
        tempfile::Builder::new()
            .prefix(&format!("neardup-fuzz-{}-", std::process::id()))
            .tempdir_in(&base)
            .expect("a scratch directory")
    })
    .path()
}

/// Removes the scratch directories in `base` of processes that no longer run.
fn remove_dead(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let proc = Path::new("/proc");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("neardup-fuzz-")) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.parse::<u32>().is_ok() && proc.is_dir() && !proc.join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Writes `bytes` to `name` in the scratch directory and returns its path.
pub fn file(name: &str, bytes: &[u8]) -> String {
    let path: PathBuf = scratch().join(name);
    std::fs::write(&path, bytes).expect("the scratch directory is writable");
    path.to_string_lossy().into_owned()
}

/// The input's lines as the readers cut them: at `\n`, the last one counted even without
/// its newline, and an empty input has none.
pub fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        out.pop();
    }
    out
}

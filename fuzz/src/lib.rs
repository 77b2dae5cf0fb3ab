//! What the fuzz targets share: a scratch directory for inputs that only exist as files
//! (the readers take paths), in memory when the system has `/dev/shm`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// This process's scratch directory, removed when the process ends normally.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let builder = tempfile::Builder::new()
            .prefix("neardup-fuzz-")
            .tempdir_in(shm);
        builder
            .or_else(|_| tempfile::tempdir())
            .expect("a scratch directory")
    })
    .path()
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

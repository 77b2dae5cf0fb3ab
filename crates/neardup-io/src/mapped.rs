//! Plain input files read where they lie, mapped into memory, by the readers of documents
//! and of fingerprints alike: the mapping, where to cut it into blocks of whole lines, and
//! giving back the pages already read.

use std::fs::File;

/// The mapping of `file` into memory, for reading its lines where they lie, when it is a
/// regular file large enough for it to pay: no copy through a buffer (on the natural
/// corpus, cutting the lines of a read file took 85 ms, of a mapped one 32). A file
/// truncated by another process while it is read ends the process (SIGBUS), as it does
/// for any program that maps its input.
pub(crate) fn mapped(file: &File) -> Option<memmap2::Mmap> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() < 1 << 16 {
        return None;
    }
    // SAFETY: a private, read-only mapping; the one hazard, another process truncating
    // the file meanwhile, is the SIGBUS documented above.
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Sequential);
    Some(map)
}

/// Bytes of a page, for giving back the pages of a mapped file already parsed.
pub(crate) const PAGE: usize = 4096;

/// Drops the whole pages of bytes `from..to` of `map` from this process's resident memory
/// (they stay in the page cache): a large file read through holds what is being read, not
/// all of it.
pub(crate) fn release(map: &memmap2::Mmap, from: usize, to: usize) {
    let (start, end) = (from.next_multiple_of(PAGE), to.min(map.len()) / PAGE * PAGE);
    if end > start {
        // SAFETY: the mapping is private and read-only: a page dropped from it reads back
        // from the file, unchanged, if it is touched again. A failure only keeps the pages.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// Where the block of `b` that starts at `at` ends: after the last newline within `size`
/// bytes, or after the first one past them when a line is longer, or at the end.
pub(crate) fn block_end(b: &[u8], at: usize, size: usize) -> usize {
    if b.len() - at <= size {
        return b.len();
    }
    match memchr::memrchr(b'\n', &b[at..at + size]) {
        Some(i) => at + i + 1,
        None => memchr::memchr(b'\n', &b[at + size..]).map_or(b.len(), |i| at + size + i + 1),
    }
}

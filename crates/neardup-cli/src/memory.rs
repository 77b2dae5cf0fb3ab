//! The process's allocator: the system's, with large blocks backed by transparent huge
//! pages where the kernel offers them on request (`madvise` mode, Debian's default).
//!
//! A batch job's large buffers (the fingerprints read, the radix sort's scratch, the
//! permuted table) are fresh memory the kernel hands over a 4 KiB page at a time: `find-all`
//! on a million fingerprints took 10,800 page faults, a sixth of its CPU; with huge pages
//! it takes 5,100, most of them the mapped input's and the program's own (docs/benchmarks.md).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Blocks of this size and more are advised.
const HUGE_FROM: usize = 4 << 20;

static HUGE: AtomicBool = AtomicBool::new(true);

/// Whether later large blocks are advised: the server turns it off, since its large
/// arrays are rebuilt and freed all day and huge pages would hold more resident memory.
pub fn huge_pages(on: bool) {
    HUGE.store(on, Ordering::Relaxed);
}

/// Sets glibc's allocator up for a batch job, before its threads start: blocks up to
/// 32 MiB come from the heap instead of mappings of their own, and freed memory stays with
/// the process instead of going back to the kernel. A batch job frees and allocates the
/// same sizes over and over (a text decoded by the reading thread and freed by a worker,
/// a worker's buffers): with glibc's defaults, each large text was a fresh mapping and the
/// heaps were trimmed, so the next batch took its page faults again. `neardup fingerprint`
/// of the natural corpus, one thread: 347 → 332 ms, peak RSS 166 → 168 MB
/// (docs/fingerprints.md). The server keeps its own setting (`serve`). A setting made in the
/// environment (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`) is
/// left as it is.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let set = |name: &str| std::env::var_os(name).is_some();
        if set("MALLOC_MMAP_THRESHOLD_") || set("MALLOC_TRIM_THRESHOLD_") || set("GLIBC_TUNABLES") {
            return;
        }
        // SAFETY: mallopt sets allocator parameters, under the allocator's own lock, and
        // nothing else. 32 MiB is glibc's largest mmap threshold on 64-bit.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        }
    }
}

/// [`System`], asking for huge pages on blocks of [`HUGE_FROM`] bytes and more.
pub struct Allocator;

/// Bytes of a page: `madvise` takes page-aligned ranges.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const PAGE: usize = 4096;

/// The whole pages of the block at `addr` of `size` bytes: start and length, or `None`
/// when it is too small to advise.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn whole_pages(addr: usize, size: usize) -> Option<(usize, usize)> {
    if size < HUGE_FROM || addr == 0 {
        return None;
    }
    let start = addr.checked_next_multiple_of(PAGE)?;
    let end = addr.checked_add(size)? / PAGE * PAGE;
    (end > start).then(|| (start, end - start))
}

/// Asks for huge pages on the whole pages of a fresh block (glibc maps large blocks
/// afresh, so their pages are not yet touched). Only a hint: a kernel without them, or
/// refusing, leaves the block as it is.
fn advise(ptr: *mut u8, size: usize) {
    if !HUGE.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Some((start, len)) = whole_pages(ptr as usize, size) {
        // SAFETY: the range lies within the block just allocated, page-aligned;
        // MADV_HUGEPAGE changes how the kernel backs it, not its contents.
        unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, size);
}

// SAFETY: every call goes to `System` with the caller's arguments; `advise` only hints
// at how the returned memory is backed.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new_size > layout.size() {
            advise(new, new_size);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn advice_stays_on_whole_pages_inside_the_block(addr in 1usize..1 << 47, size in 0usize..64 << 20) {
            match whole_pages(addr, size) {
                Some((start, len)) => {
                    prop_assert!(size >= HUGE_FROM);
                    prop_assert_eq!(start % PAGE, 0);
                    prop_assert_eq!(len % PAGE, 0);
                    prop_assert!(start >= addr && start + len <= addr + size);
                    // Every whole page of the block is covered.
                    prop_assert!(start - addr < PAGE && addr + size - (start + len) < PAGE);
                }
                None => prop_assert!(size < HUGE_FROM),
            }
        }
    }

    #[test]
    fn freed_memory_comes_back_zeroed_when_asked() {
        // Kept memory is handed out again: a zeroed block must still read zero.
        keep_freed_memory();
        for _ in 0..4 {
            let mut v = vec![0u8; 3 << 20];
            assert!(v.iter().all(|&b| b == 0), "a zeroed block holds old bytes");
            v.fill(0xA5);
            drop(v);
        }
    }

    #[test]
    fn large_blocks_keep_their_contents() {
        // Zeroed, written, grown and shrunk through the allocator: advice changes nothing.
        let mut v = vec![0u64; HUGE_FROM];
        assert!(
            v.iter().all(|&x| x == 0),
            "a fresh zeroed block holds non-zero bytes"
        );
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as u64;
        }
        v.resize(3 * HUGE_FROM, 7);
        assert!(v[..HUGE_FROM]
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u64));
        assert!(v[HUGE_FROM..].iter().all(|&x| x == 7));
        v.truncate(5);
        v.shrink_to_fit();
        assert_eq!(v, [0, 1, 2, 3, 4]);
    }
}

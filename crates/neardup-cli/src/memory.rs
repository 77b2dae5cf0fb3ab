//! The process's allocator: the system's, with large blocks backed by transparent huge
//! pages where the kernel offers them on request (`madvise` mode, Debian's default).
//!
//! A batch job's large buffers (the fingerprints read, the radix sort's scratch, the
//! permuted table) are fresh memory the kernel hands over a 4 KiB page at a time: `find-all`
//! on a million fingerprints took 10,800 page faults, a sixth of its CPU. With huge pages
//! and the blocks placed on huge-page boundaries it takes under 1,000, most of them the
//! mapped input's and the program's own (docs/benchmarks.md).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Blocks of this size and more go on huge pages.
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

/// [`System`], with blocks of [`HUGE_FROM`] bytes and more on huge pages.
pub struct Allocator;

/// Bytes of a huge page on x86-64 (and arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// The block asked of [`System`] for a large `layout`: started and ended on huge-page
/// boundaries, so the kernel can back all of it with huge pages. A block placed anywhere on
/// the heap left up to 2 MiB at each end (shared with its neighbours' headers) to 4 KiB
/// faults: 1,240 of the 2,250 faults of `find-all` on a million fingerprints. `None` for a
/// small layout, which goes to [`System`] as it is.
fn huge_backing(layout: Layout) -> Option<Layout> {
    if layout.size() < HUGE_FROM {
        return None;
    }
    let size = layout.size().checked_next_multiple_of(HUGE_PAGE)?;
    Layout::from_size_align(size, layout.align().max(HUGE_PAGE)).ok()
}

/// Asks for huge pages on a fresh block of [`huge_backing`], before anything touches it.
/// Only a hint: a kernel without them, or refusing, leaves the block as it is.
fn advise(ptr: *mut u8, backing: Layout) {
    if ptr.is_null() || !HUGE.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: the range is the whole block just allocated, which starts and ends on page
    // boundaries; MADV_HUGEPAGE changes how the kernel backs it, not its contents.
    unsafe {
        libc::madvise(ptr.cast(), backing.size(), libc::MADV_HUGEPAGE)
    };
    #[cfg(not(target_os = "linux"))]
    let _ = backing;
}

/// Zeroes a block of [`huge_backing`] by handing its pages back to the kernel, which
/// gives zeroed ones on the next touch, and says whether it did. glibc zeroes an
/// over-aligned block by writing it: on one thread, before the block is advised, and even
/// when it is fresh from the kernel and already zero; dropped pages are zeroed as the
/// block's users first touch them, on their threads.
fn drop_pages(ptr: *mut u8, backing: Layout) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the range is the whole block, ours and page-aligned at both ends (it holds
        // none of glibc's chunk headers); on private anonymous memory, which glibc's heap
        // and mappings are, MADV_DONTNEED leaves zero-fill-on-demand pages.
        unsafe { libc::madvise(ptr.cast(), backing.size(), libc::MADV_DONTNEED) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ptr, backing);
        false
    }
}

// SAFETY: every block comes from `System` with the caller's layout or, for a large one, its
// `huge_backing` (as large and at least as aligned), and goes back to `System` with the same
// layout, since `huge_backing` depends on the layout alone. `advise` only hints at how
// memory is backed.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(backing) = huge_backing(layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc(layout) };
        };
        // SAFETY: `backing` is a valid layout of non-zero size.
        let ptr = unsafe { System.alloc(backing) };
        advise(ptr, backing);
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let Some(backing) = huge_backing(layout) else {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc_zeroed(layout) };
        };
        // SAFETY: `backing` is a valid layout of non-zero size.
        let ptr = unsafe { System.alloc(backing) };
        if !ptr.is_null() && !drop_pages(ptr, backing) {
            // SAFETY: the zeroing stays within the block.
            unsafe { ptr.write_bytes(0, layout.size()) };
        }
        advise(ptr, backing);
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout's backing (see `alloc`).
        unsafe { System.dealloc(ptr, huge_backing(layout).unwrap_or(layout)) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: `new_size`, rounded up to the alignment, fits isize.
        let wanted = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (huge_backing(layout), huge_backing(wanted)) {
            // Small to small: glibc's realloc, which can grow a block in place.
            // SAFETY: the caller's contract, passed on.
            (None, None) => return unsafe { System.realloc(ptr, layout, new_size) },
            (Some(old), Some(new)) if old == new => return ptr,
            _ => {}
        }
        // To or from huge pages the block moves by hand: `System.realloc` would copy into
        // the new block before it is advised.
        // SAFETY: `wanted` is valid (above); the copy stays within both blocks; `ptr` goes
        // back with the layout it came with.
        unsafe {
            let moved = self.alloc(wanted);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            moved
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Each case writes up to 60 MB.
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn large_blocks_cover_whole_huge_pages(size in 1usize..64 << 20, align_log in 0u32..23) {
            let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
            match huge_backing(layout) {
                Some(b) => {
                    prop_assert!(size >= HUGE_FROM);
                    prop_assert_eq!(b.size() % HUGE_PAGE, 0);
                    prop_assert_eq!(b.align() % HUGE_PAGE, 0);
                    prop_assert!(b.align() >= layout.align());
                    // As large as asked, and no more than one huge page larger.
                    prop_assert!(b.size() >= size && b.size() - size < HUGE_PAGE);
                }
                None => prop_assert!(size < HUGE_FROM),
            }
        }

        #[test]
        fn blocks_keep_their_contents_through_every_resize(
            sizes in prop::collection::vec(
                prop_oneof![1usize..1 << 16, HUGE_FROM - 8..HUGE_FROM + 8, HUGE_FROM..12 << 20],
                1..6,
            ),
        ) {
            // Grown and shrunk across the huge-page line and within it: every kept byte
            // survives, new room reads as written, and large blocks sit on huge pages.
            let mut v: Vec<u8> = Vec::new();
            for (round, &size) in sizes.iter().enumerate() {
                let fill = round as u8;
                let kept = v.len().min(size);
                let before = v[..kept].to_vec();
                v.resize(size, fill);
                v.shrink_to_fit();
                prop_assert_eq!(&v[..kept], &before[..]);
                prop_assert!(v[kept..].iter().all(|&b| b == fill));
                if v.capacity() >= HUGE_FROM {
                    prop_assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0);
                }
            }
        }
    }

    #[test]
    fn freed_memory_comes_back_zeroed_when_asked() {
        // Kept memory is handed out again: a zeroed block must still read zero, small
        // (glibc's calloc) or large (zeroed here).
        keep_freed_memory();
        for size in [3 << 20, HUGE_FROM + 1, 9 << 20] {
            for _ in 0..4 {
                let mut v = vec![0u8; size];
                assert!(
                    v.iter().all(|&b| b == 0),
                    "a zeroed block of {size} holds old bytes"
                );
                v.fill(0xA5);
                drop(v);
            }
        }
    }
}

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

/// Gives the memory the allocator holds free back to the system. [`keep_freed_memory`]
/// keeps it for reuse, which suits a job allocating the same sizes over and over; but a
/// step that frees its state (dedup's columns once spilled, a sort's entries) before the
/// next allocates in other sizes would otherwise hold both: at 100M documents within
/// `--memory 4G`, 2 GB freed by pass 1 stayed resident under every later step.
///
/// Less than a 64th of the job's memory `budget` free is kept: the next step would take
/// it from the kernel again, every page zeroed on its first touch (on the natural corpus
/// the 28–39 MB free between dedup's steps came back as a quarter of its page faults and
/// 5% of its CPU), and the budget has room for it.
pub fn give_back_freed(budget: u64) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 reads the allocator's statistics, and malloc_trim frees what is
    // free, each under the allocator's own locks.
    unsafe {
        if libc::mallinfo2().fordblks as u64 >= budget / 64 {
            libc::malloc_trim(0);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = budget;
}

/// The process's peak resident memory so far, in bytes: Linux's `VmHWM`. `None` where the
/// system does not say. (Not reset between steps: resetting it would also reset what
/// `/usr/bin/time` and other observers report as the process's peak.)
pub fn peak_resident() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

/// [`System`], with blocks of 4 MiB and more (`HUGE_FROM`) on huge pages.
pub struct Allocator;

/// Bytes of a huge page on x86-64 (and arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// Bytes before a large block that hold where its allocation starts.
const HEADER: usize = std::mem::size_of::<usize>();

/// How a large block lies in what is asked of [`System`].
///
/// The block starts and ends on huge-page boundaries, so the kernel can back all of it
/// with huge pages: a block placed anywhere on the heap left up to 2 MiB at each end
/// (shared with its neighbours' headers) to 4 KiB faults, 1,240 of the 2,250 faults of
/// `find-all` on a million fingerprints. It is cut from a plain allocation one alignment
/// larger, with the allocation's start noted just before it, rather than asked aligned
/// (`posix_memalign`), whose blocks fragmented glibc's heap: peak memory of `bench
/// find-all --repeats 9` on a million fingerprints 44 MB this way, 69 MB that way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Huge {
    /// What is asked of [`System`].
    outer: Layout,
    /// Bytes of the block: whole huge pages.
    size: usize,
    /// Where the block starts: a multiple of this.
    align: usize,
}

/// The placement of a block for `layout`, or `None` for a small one, which goes to
/// [`System`] as it is.
fn huge(layout: Layout) -> Option<Huge> {
    if layout.size() < HUGE_FROM {
        return None;
    }
    let align = layout.align().max(HUGE_PAGE);
    let size = layout.size().checked_next_multiple_of(HUGE_PAGE)?;
    let outer = Layout::from_size_align(size.checked_add(align)?, HEADER).ok()?;
    Some(Huge { outer, size, align })
}

/// Bytes from the start of an allocation at `addr` to the block in it: the first multiple
/// of `align` with room for the header before it. With `addr` a multiple of [`HEADER`],
/// the block fits: the offset is at most `align`.
fn block_offset(addr: usize, align: usize) -> usize {
    (addr + HEADER).next_multiple_of(align) - addr
}

impl Huge {
    /// Cuts the block out of a fresh allocation (or passes on a null one), notes where the
    /// allocation starts, and asks for huge pages on the block before anything touches it.
    /// Only a hint: a kernel without them, or refusing, leaves the block as it is.
    ///
    /// # Safety
    /// `outer` is null or an allocation of `self.outer`.
    unsafe fn place(self, outer: *mut u8) -> *mut u8 {
        if outer.is_null() {
            return outer;
        }
        // SAFETY: the offset is at most `align`, and `outer` holds `align + size` bytes: the
        // block and the header before it lie within the allocation; the block is aligned to
        // `align`, so the header is aligned to `HEADER`.
        let block = unsafe {
            let block = outer.add(block_offset(outer as usize, self.align));
            block.sub(HEADER).cast::<*mut u8>().write(outer);
            block
        };
        #[cfg(target_os = "linux")]
        if HUGE.load(Ordering::Relaxed) {
            // SAFETY: the block starts and ends on page boundaries; MADV_HUGEPAGE changes how
            // the kernel backs it, not its contents.
            unsafe { libc::madvise(block.cast(), self.size, libc::MADV_HUGEPAGE) };
        }
        block
    }

    /// The allocation a block of [`Huge::place`] was cut from.
    ///
    /// # Safety
    /// `block` came from `place`.
    unsafe fn allocation_of(block: *mut u8) -> *mut u8 {
        // SAFETY: `place` wrote the allocation's start just before the block.
        unsafe { block.sub(HEADER).cast::<*mut u8>().read() }
    }
}

/// Bytes of a page, the unit `mincore` and `madvise` work in.
#[cfg(target_os = "linux")]
const PAGE: usize = 4096;

/// Zeroes a large block of whole pages: the pages already in memory (used and freed
/// before) by writing them, the others by handing them back (`MADV_DONTNEED`), which
/// leaves pages the kernel zeroes at their first touch. A block fresh from the kernel is
/// thus zeroed without a write, its pages taken as huge pages by its users on their
/// threads (glibc's `calloc` wrote up to 2 MiB of such a block, the old top of its heap,
/// before it could be advised); a block reused from an earlier repeat of a job is written,
/// not taken from the kernel again (handing back every page made `bench find-all
/// --repeats 9` slower).
///
/// # Safety
/// `block` is a block of this allocator's, page-aligned, nobody else's yet, holding `size`
/// bytes rounded up to a whole page.
unsafe fn zero(block: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    {
        let size = size.next_multiple_of(PAGE);
        // Residency of up to 16 MB of pages per call; a page swapped out reads as absent,
        // and dropping it is as right as for one never touched.
        let mut resident = [0u8; 4096];
        let mut at = 0;
        while at < size {
            let len = (size - at).min(resident.len() * PAGE);
            // SAFETY: the range is within the block, page-aligned; `resident` has a byte
            // for each of its pages.
            let known =
                unsafe { libc::mincore(block.add(at).cast(), len, resident.as_mut_ptr()) == 0 };
            // Pages not in memory; none when `mincore` failed, so all are written.
            let absent = |page: usize| known && resident[page] & 1 == 0;
            let pages = len / PAGE;
            let mut page = 0;
            while page < pages {
                let drop = absent(page);
                let mut end = page + 1;
                while end < pages && absent(end) == drop {
                    end += 1;
                }
                let (from, bytes) = (at + page * PAGE, (end - page) * PAGE);
                // SAFETY: the run is within the block, page-aligned; the block is private
                // anonymous memory (glibc's heap or mappings), where dropped pages read back
                // as zeroes.
                let dropped = drop
                    && unsafe {
                        libc::madvise(block.add(from).cast(), bytes, libc::MADV_DONTNEED) == 0
                    };
                if !dropped {
                    // SAFETY: the run is within the block.
                    unsafe { block.add(from).write_bytes(0, bytes) };
                }
                page = end;
            }
            at += len;
        }
    }
    #[cfg(not(target_os = "linux"))]
    // SAFETY: the block is `size` bytes.
    unsafe {
        block.write_bytes(0, size)
    };
}

// SAFETY: a small block comes from `System` with the caller's layout and goes back with it;
// a large one is cut from an allocation of its `huge(layout).outer`, which goes back with
// that layout, since `huge` depends on the layout alone.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match huge(layout) {
            // SAFETY: the caller's contract, passed on.
            None => unsafe { System.alloc(layout) },
            // SAFETY: `outer` is a valid layout of non-zero size; `place` gets its allocation.
            Some(h) => unsafe { h.place(System.alloc(h.outer)) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match huge(layout) {
            // SAFETY: the caller's contract, passed on.
            None => unsafe { System.alloc_zeroed(layout) },
            // Not `System.alloc_zeroed` (see `zero`). Only the bytes asked for: the rest of
            // the last huge page is never read as zero.
            // SAFETY: as in `alloc`; the block holds `h.size` bytes, whole huge pages.
            Some(h) => unsafe {
                let block = h.place(System.alloc(h.outer));
                if !block.is_null() {
                    zero(block, layout.size());
                }
                block
            },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match huge(layout) {
            // SAFETY: the caller's contract, passed on.
            None => unsafe { System.dealloc(ptr, layout) },
            // SAFETY: `ptr` was placed in an allocation of `h.outer` (see `alloc`).
            Some(h) => unsafe { System.dealloc(Huge::allocation_of(ptr), h.outer) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: `new_size`, rounded up to the alignment, fits isize.
        let wanted = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (huge(layout), huge(wanted)) {
            // Small to small: glibc's realloc, which can grow a block in place.
            // SAFETY: the caller's contract, passed on.
            (None, None) => return unsafe { System.realloc(ptr, layout, new_size) },
            (Some(old), Some(new)) if old == new => return ptr,
            _ => {}
        }
        // A large block moves by hand, into a block placed on huge pages.
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

    /// Bytes on [`Allocator`], called by name: the binaries declare it as the global
    /// allocator, the library (and so its test binary) does not.
    struct Block {
        ptr: *mut u8,
        size: usize,
    }

    impl Block {
        fn layout(size: usize) -> Layout {
            Layout::from_size_align(size, 1).unwrap()
        }

        /// `size` bytes (not zero), zeroed when asked, else to be written before read.
        fn new(size: usize, zeroed: bool) -> Block {
            // SAFETY: a layout of non-zero size; the block goes back in `drop`.
            let ptr = unsafe {
                if zeroed {
                    Allocator.alloc_zeroed(Block::layout(size))
                } else {
                    Allocator.alloc(Block::layout(size))
                }
            };
            assert!(!ptr.is_null());
            Block { ptr, size }
        }

        /// Grown or shrunk to `size` bytes (not zero), as a `Vec` is.
        fn resize(&mut self, size: usize) {
            // SAFETY: the block is this allocator's, of this layout.
            self.ptr = unsafe { Allocator.realloc(self.ptr, Block::layout(self.size), size) };
            assert!(!self.ptr.is_null());
            self.size = size;
        }

        /// Writes `byte` from `from` to the end.
        fn fill_from(&mut self, from: usize, byte: u8) {
            // SAFETY: within the block.
            unsafe { self.ptr.add(from).write_bytes(byte, self.size - from) };
        }

        /// The first `n` bytes, which have been written (or zeroed).
        fn bytes(&self, n: usize) -> &[u8] {
            assert!(n <= self.size);
            // SAFETY: within the block, and initialised (above).
            unsafe { std::slice::from_raw_parts(self.ptr, n) }
        }
    }

    impl Drop for Block {
        fn drop(&mut self) {
            // SAFETY: the block is this allocator's, of this layout, freed once.
            unsafe { Allocator.dealloc(self.ptr, Block::layout(self.size)) };
        }
    }

    proptest! {
        // Each case writes up to 60 MB.
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn large_blocks_cover_whole_huge_pages(size in 1usize..64 << 20, align_log in 0u32..23) {
            let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
            match huge(layout) {
                Some(h) => {
                    prop_assert!(size >= HUGE_FROM);
                    prop_assert_eq!(h.size % HUGE_PAGE, 0);
                    prop_assert_eq!(h.align % HUGE_PAGE, 0);
                    prop_assert!(h.align >= layout.align());
                    // As large as asked, and no more than one huge page larger.
                    prop_assert!(h.size >= size && h.size - size < HUGE_PAGE);
                    prop_assert_eq!(h.outer.size(), h.size + h.align);
                }
                None => prop_assert!(size < HUGE_FROM),
            }
        }

        #[test]
        fn blocks_fit_their_allocations(k in 1usize..1 << 16, words in -16isize..16, align_log in 21u32..30) {
            // Allocations starting at, just before and just after an alignment boundary.
            let align = 1usize << align_log;
            let addr = (k << align_log).wrapping_add_signed(words * HEADER as isize);
            let offset = block_offset(addr, align);
            prop_assert_eq!((addr + offset) % align, 0);
            prop_assert!(offset >= HEADER, "no room for the header");
            prop_assert!(offset <= align, "the block runs past the allocation");
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
            let mut block: Option<Block> = None;
            for (round, &size) in sizes.iter().enumerate() {
                let fill = round as u8;
                let kept = block.as_ref().map_or(0, |b| b.size.min(size));
                let before = block.as_ref().map_or(vec![], |b| b.bytes(kept).to_vec());
                let mut b = match block.take() {
                    Some(mut b) => {
                        b.resize(size);
                        b
                    }
                    None => Block::new(size, false),
                };
                b.fill_from(kept, fill);
                prop_assert_eq!(b.bytes(kept), &before[..]);
                prop_assert!(b.bytes(size)[kept..].iter().all(|&x| x == fill));
                if size >= HUGE_FROM {
                    prop_assert_eq!(b.ptr as usize % HUGE_PAGE, 0);
                }
                block = Some(b);
            }
        }
    }

    #[test]
    fn zeroing_clears_pages_in_memory_and_not() {
        let layout = Layout::from_size_align(HUGE_FROM + 3 * 4096 + 5, 8).unwrap();
        let h = huge(layout).unwrap();
        // SAFETY: the block is this allocator's, of `h.size` bytes, and freed once.
        unsafe {
            let block = Allocator.alloc(layout);
            assert!(!block.is_null());
            // Every third page written: runs of pages in memory and of pages not.
            for page in (0..h.size / 4096).step_by(3) {
                block.add(page * 4096 + 17).write(0xA5);
            }
            zero(block, h.size);
            let bytes = std::slice::from_raw_parts(block, h.size);
            assert!(bytes.iter().all(|&b| b == 0), "a written byte survived");
            Allocator.dealloc(block, layout);
        }
    }

    #[test]
    fn freed_memory_comes_back_zeroed_when_asked() {
        // Kept memory is handed out again: a zeroed block must still read zero, small or
        // large.
        keep_freed_memory();
        for size in [3 << 20, HUGE_FROM + 1, 9 << 20] {
            for _ in 0..4 {
                let mut b = Block::new(size, true);
                assert!(
                    b.bytes(size).iter().all(|&x| x == 0),
                    "a zeroed block of {size} holds old bytes"
                );
                b.fill_from(0, 0xA5);
                drop(b);
            }
        }
    }
}

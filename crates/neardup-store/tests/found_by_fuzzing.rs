//! What fuzzing the store file found (fuzz/fuzz_targets/store_file.rs), kept as tests.
//! The allocator of this test binary notes the largest allocation asked for, so that a
//! damaged size read whole is seen without the machine running out of memory.
//!
//! A file cut short and lengthened again with zeros (what `check`, `export` and `repair`
//! read) has regions whose allocator state is zeros, and redb's integrity check panics on
//! them (an index out of bounds in its region bitmaps). The store catches that as damage;
//! the panic must not be reported on standard error either (a user would see "thread main
//! panicked" above a clear error), which the panic hook this test installs checks.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup::jaccard::Threshold;
use neardup::tables::Blocks;
use neardup_store::{
    DocConfig, DocumentStore, FingerprintStore, StoreConfig, StoreError, Write, FILE,
};

/// The system allocator, refusing (and noting) any allocation above 1 GiB: no store of
/// these tests needs one, and a damaged size would ask for far more.
struct Noting;

static LARGEST_REFUSED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Noting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > 1 << 30 {
            LARGEST_REFUSED.fetch_max(layout.size(), Ordering::SeqCst);
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > 1 << 30 {
            LARGEST_REFUSED.fetch_max(layout.size(), Ordering::SeqCst);
            return std::ptr::null_mut();
        }
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Noting = Noting;

const CONFIG: StoreConfig = StoreConfig {
    blocks: Blocks::Fixed(4),
    distance: 3,
    fingerprint_version: 1,
};

fn fp(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The fuzz target's store: documents with and without expiries, some replaced, some
/// removed.
fn fuzz_base(dir: &Path) {
    let mut store = FingerprintStore::create(dir, CONFIG, 1000).unwrap();
    let ids: Vec<String> = (0..300).map(|i| format!("doc-{i}")).collect();
    let docs: Vec<(&str, u64, Option<Duration>)> = ids
        .iter()
        .zip(0u64..)
        .map(|(id, i)| {
            let ttl = (i % 3 == 0).then(|| Duration::from_secs(i % 2 * 3600));
            (id.as_str(), fp(i), ttl)
        })
        .collect();
    store.insert_bulk(&docs, |_| {}).unwrap();
    for i in (0..300).step_by(7) {
        store
            .insert(&format!("doc-{i}"), fp(i + 1000), None)
            .unwrap();
    }
    for i in (0..300).step_by(11) {
        store.remove(&format!("doc-{i}")).unwrap();
    }
}

#[test]
fn a_store_cut_short_is_checked_exported_and_repaired_without_a_panic_report() {
    let reported = Arc::new(AtomicUsize::new(0));
    let count = reported.clone();
    std::panic::set_hook(Box::new(move |info| {
        count.fetch_add(1, Ordering::SeqCst);
        eprintln!("reported: {info}");
    }));

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    fuzz_base(&dir);
    let path = dir.join(FILE);
    let whole = std::fs::read(&path).unwrap();
    let mut redb_stopped = 0;
    // The fuzzer's length (786,445 of 3,686,400 bytes), and others around the file.
    let mut lengths = vec![786_445];
    lengths.extend((1..16).map(|k| whole.len() * k / 16 + 13));
    for len in lengths {
        std::fs::write(&path, &whole[..len]).unwrap();
        let saw = |e: &StoreError| {
            let text = e.to_string();
            assert!(text.contains(FILE), "{len}: {text}");
            usize::from(text.contains("redb stopped on it"))
        };
        match neardup_store::check(&dir) {
            Ok(check) => {
                assert!(!check.problems.is_empty(), "{len}: a cut file checks whole");
                redb_stopped += check
                    .problems
                    .iter()
                    .filter(|p| p.contains("redb stopped on it"))
                    .count();
            }
            Err(e) => redb_stopped += saw(&e),
        }
        if let Err(e) = neardup_store::export(&dir, |_| Ok::<(), ()>(())) {
            redb_stopped += saw(&e);
        }
        match FingerprintStore::open(&dir, None) {
            Err(e) => assert!(matches!(e, StoreError::Damaged { .. }), "{len}: {e}"),
            Ok(_) => panic!("{len}: a cut store opens"),
        }
        match neardup_store::repair(&dir) {
            // A repaired store opens whole.
            Ok(_) => {
                let store = FingerprintStore::open(&dir, None).unwrap();
                store.records().unwrap();
            }
            Err(e) => redb_stopped += saw(&e),
        }
    }
    assert!(
        redb_stopped > 0,
        "no cut made redb panic: the test tests nothing"
    );
    assert_eq!(
        reported.load(Ordering::SeqCst),
        0,
        "a caught panic was reported"
    );
}

/// A header whose sizes make redb read 64 GiB: `check` lengthened a cut copy to what the
/// header says, and redb read the region tracker (its page order damaged) whole (found
/// by fuzzing; an abort where the allocation is refused, as this test's allocator refuses
/// it). Such a header is damage now, said before redb reads anything.
#[test]
fn an_implausible_region_layout_is_damage_before_redb_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    fuzz_base(&dir);
    let path = dir.join(FILE);
    let bytes = std::fs::read(&path).unwrap();
    // The header's region_header_pages (bytes 16..20), its region_pages (20..24), and the
    // order of its region tracker's page (the top 5 bits of 32..40, as the fuzzer left
    // them, in a file it cut short).
    for (at, value, cut) in [
        (16, 1u32 << 24, false),
        (20, u32::MAX, false),
        (36, 0xc7c7_2dc7, true),
    ] {
        let mut damaged = bytes.clone();
        damaged[at..at + 4].copy_from_slice(&value.to_le_bytes());
        if cut {
            damaged.truncate(879);
        }
        std::fs::write(&path, &damaged).unwrap();
        let err = FingerprintStore::open(&dir, None).unwrap_err();
        assert!(err.to_string().contains("its header says"), "{err}");
        let check = neardup_store::check(&dir).unwrap();
        assert!(!check.complete && check.documents == 0, "{check:?}");
        assert!(
            check.problems.iter().any(|p| p.contains("its header says")),
            "{check:?}"
        );
        neardup_store::export(&dir, |_| Ok::<(), ()>(()))
            .unwrap()
            .unwrap();
        assert!(neardup_store::repair(&dir).is_err());
        assert_eq!(LARGEST_REFUSED.load(Ordering::SeqCst), 0);
    }
}

/// The fuzz target's document store: texts of two paragraphs, with and without expiries,
/// some replaced, some removed.
fn fuzz_documents(dir: &Path) {
    let text = |i: u64| {
        let word = |j: u64| format!("w{}", (i * 7919 + j * 104_729) % 1_000_003);
        let first: Vec<String> = (0..30).map(word).collect();
        let second: Vec<String> = (30..60).map(word).collect();
        format!("{}\n\n{}", first.join(" "), second.join(" "))
    };
    let config = DocConfig {
        threshold: Threshold::default(),
        paragraphs: true,
    };
    let mut store = DocumentStore::create(dir, config).unwrap();
    let prep = store.preparer();
    let put = |i: u64, ttl: Option<Duration>| Write::Put {
        id: format!("doc-{}", i % 1000),
        doc: Box::new(prep.prepare(&text(i), false)),
        ttl,
        only_if_unique: false,
    };
    let writes = (0..300)
        .map(|i| put(i, (i % 3 == 0).then(|| Duration::from_secs(i % 2 * 3600))))
        .collect();
    store.apply(writes).unwrap();
    store
        .apply((0..300).step_by(7).map(|i| put(i + 1000, None)).collect())
        .unwrap();
    let removes = (0..300)
        .step_by(11)
        .map(|i| Write::Delete {
            id: format!("doc-{i}"),
        })
        .collect();
    store.apply(removes).unwrap();
}

/// A commit slot whose page numbers are damaged (22 bytes of the second slot overwritten,
/// found by fuzzing a document store): redb's integrity check sized a page read from them
/// and asked for 8 TiB, an allocation whose failure aborts the process. redb's reads now go
/// through a backend that refuses a read past the end of the file before allocating.
#[test]
fn a_damaged_commit_slot_is_damage_not_a_read_of_terabytes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    fuzz_documents(&dir);
    let path = dir.join(FILE);
    let mut damaged = std::fs::read(&path).unwrap();
    damaged[199..221].copy_from_slice(&[
        0x00, 0x2d, 0x05, 0x05, 0x05, 0x05, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0x05, 0x05, 0x05, 0x05, 0x05, 0x05, 0x05,
    ]);
    std::fs::write(&path, &damaged).unwrap();
    let check = neardup_store::check(&dir).unwrap();
    assert!(
        check
            .problems
            .iter()
            .any(|p| p.contains("passes the end of the file")),
        "{check:?}"
    );
    let _ = neardup_store::export(&dir, |_| Ok::<(), ()>(()));
    if neardup_store::repair(&dir).is_ok() {
        DocumentStore::open(&dir, None)
            .unwrap()
            .get("doc-1")
            .unwrap();
    }
    std::fs::write(&path, &damaged).unwrap();
    if let Ok(store) = DocumentStore::open(&dir, None) {
        let _ = store.get("doc-1");
    }
    assert_eq!(LARGEST_REFUSED.load(Ordering::SeqCst), 0);
}

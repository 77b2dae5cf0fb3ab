//! Reading fingerprints: newline-separated decimal u64 (the simhash-cpp format), from a
//! file or standard input (`-`), strictly: a line that is not a decimal u64 is an error that
//! names the file and the line; blank lines are skipped. Also the little-endian u64 files
//! of the peers' workloads, and the JSON lines `neardup fingerprint` writes.

use std::fs::File;
use std::io::{self, Read};

use serde_json::Value;

use crate::docs::id_text;
use crate::mapped::{block_end, mapped, release, PAGE};
use crate::{Error, Progress};

pub use crate::error::LineError;

/// Where fingerprints come from, with the name used in messages.
pub struct Source {
    /// The path, or `<stdin>`.
    pub name: String,
    reader: Box<dyn Read>,
    /// Size in bytes, when known (a regular file).
    pub len: Option<u64>,
    /// The file mapped into memory, when it is a regular one large enough for it to pay.
    map: Option<memmap2::Mmap>,
}

impl Source {
    /// Opens `path`, or standard input for `-`.
    pub fn open(path: &str) -> Result<Source, Error> {
        if path == "-" {
            return Ok(Source {
                name: "<stdin>".into(),
                reader: Box::new(io::stdin()),
                len: None,
                map: None,
            });
        }
        let open = |error| Error::Open {
            path: path.into(),
            error,
        };
        let file = File::open(path).map_err(open)?;
        let meta = file.metadata().map_err(open)?;
        if meta.is_dir() {
            return Err(Error::IsDirectory { path: path.into() });
        }
        Ok(Source {
            name: path.into(),
            map: mapped(&file),
            reader: Box::new(file),
            len: meta.is_file().then_some(meta.len()),
        })
    }
}

impl Source {
    /// The bytes, buffered (for reading lines as bytes: `BufRead::read_until`).
    pub fn into_reader(self) -> std::io::BufReader<Box<dyn Read>> {
        std::io::BufReader::with_capacity(1 << 20, self.reader)
    }
}

/// The fingerprint on one line: `None` for a blank line. Surrounding ASCII white space
/// (including a `\r` from CRLF files) is ignored.
pub fn parse_line(line: &[u8]) -> Result<Option<u64>, LineError> {
    let line = line.trim_ascii();
    match digits(line) {
        Some(v) => Ok(Some(v)),
        None => parse_scalar(line),
    }
}

/// The value of 1 to 20 ASCII digits; `None` for anything else (and above 2^64 − 1),
/// which [`parse_scalar`] then reads or refuses by name. Read eight at a time by
/// [`quick_line`], with a newline put after them: a digit at a time, parsing was most of
/// `find-all`'s reading (80 ns a line; most u64 have twenty digits).
fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut w = [b'\n'; 24];
    w[..b.len()].copy_from_slice(b);
    quick_line(&w, 0)
        .filter(|&(_, next)| next == b.len() + 1)
        .map(|(v, _)| v)
}

/// The high bit of each byte of `x` that is not an ASCII digit.
fn non_digits(x: u64) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    // Digits become 0–9; adding 0x76 to the low seven bits reaches the high bit exactly
    // from 10 up, and never carries into the next byte; a high bit set already is kept.
    let t = x ^ 0x3030_3030_3030_3030;
    (((t & LOW7) + 0x7676_7676_7676_7676) | t) & !LOW7
}

/// Eight ASCII digits, the first in the lowest byte, as their number (simdjson's
/// `parse_eight_digits_unrolled`), unchecked: each byte a digit, or 0 (a leading zero).
fn eight_value(x: u64) -> u64 {
    let v = (x & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561) >> 8;
    let v = (v & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16;
    (v & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32
}

/// The eight bytes of `b` from `at`, the first in the lowest byte.
fn word(b: &[u8; 24], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The line at `at` when it is 1 to 20 digits and a newline, as most lines of a
/// fingerprint list are: its value and where the next line starts. Read eight bytes at a
/// time, the newline found on the way (no search of its own); `None` for any other line
/// (and within 24 bytes of the end), which [`parse_line`] then reads or refuses by name.
#[inline]
fn quick_line(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let w: &[u8; 24] = b.get(at..at + 24)?.try_into().ok()?;
    // The digits of a word before its first other byte, as a number: moved to the top
    // bytes, below them zeros, which read as leading zeros.
    let head = |x: u64, k: usize| match k {
        0 => 0,
        _ => eight_value(x << (64 - 8 * k)),
    };
    let mut v = 0u64;
    for i in 0..3 {
        let x = word(w, 8 * i);
        let stop = non_digits(x);
        if stop == 0 {
            if i == 2 {
                // Twenty-four digits and more.
                return None;
            }
            v = v * 100_000_000 + eight_value(x);
            continue;
        }
        let k = stop.trailing_zeros() as usize / 8;
        let end = 8 * i + k;
        if end == 0 || w[end] != b'\n' || end > 20 {
            return None;
        }
        // Up to sixteen digits cannot overflow; twenty can.
        const POW10: [u64; 8] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];
        let v = v.checked_mul(POW10[k])?.checked_add(head(x, k))?;
        return Some((v, at + end + 1));
    }
    None
}

/// [`parse_line`] a digit at a time, on a trimmed line: the reference, and the reader of
/// what [`digits`] does not take (every error).
fn parse_scalar(line: &[u8]) -> Result<Option<u64>, LineError> {
    let Some(&first) = line.first() else {
        return Ok(None);
    };
    if first == b'+' || first == b'-' {
        return Err(LineError::Sign);
    }
    let digit = |b: u8| {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            Err(LineError::NotDigit(b))
        } else {
            Ok(u64::from(d))
        }
    };
    // Nineteen digits cannot overflow a u64: only the rest need checked arithmetic.
    let (head, tail) = line.split_at(line.len().min(19));
    let mut v: u64 = 0;
    for &b in head {
        v = v * 10 + digit(b)?;
    }
    for &b in tail {
        let d = digit(b)?;
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(d))
            .ok_or(LineError::TooLarge)?;
    }
    Ok(Some(v))
}

/// Bytes of input parsed by one task: large enough to amortise a task, small enough that
/// a wave of them stays a few tens of MB.
const BLOCK: usize = 8 << 20;

/// A line that is not a fingerprint: its number within its block, why, and its text.
type BadLine = (u64, LineError, String);

/// How many lines a block of whole lines holds (the last may lack its newline): the most
/// fingerprints it can give.
fn line_count(block: &[u8]) -> usize {
    let newlines = memchr::memchr_iter(b'\n', block).count();
    newlines + usize::from(block.last().is_some_and(|&b| b != b'\n'))
}

/// Parses a block of whole lines (the last may lack its newline), giving each value to
/// `put` in order: at most one a line. Returns the number of lines.
#[inline]
fn parse_block(block: &[u8], mut put: impl FnMut(u64)) -> Result<u64, BadLine> {
    let mut lines = 0u64;
    let mut start = 0;
    let eights = Eights::detect();
    // Lines read one at a time before eight at a time is tried again: a file that the
    // wide path refuses throughout (CRLF, padded lines) pays for one try in eight lines.
    let mut single = 0;
    while start < block.len() {
        if single == 0 {
            let mut values = [0u64; 8];
            while let Some(next) = eights.parse(block, start, &mut values) {
                values.iter().for_each(|&v| put(v));
                lines += 8;
                start = next;
            }
            single = 8;
            continue;
        }
        single -= 1;
        lines += 1;
        if let Some((v, next)) = quick_line(block, start) {
            put(v);
            start = next;
            continue;
        }
        // The last line may lack its newline.
        let end = memchr::memchr(b'\n', &block[start..]).map_or(block.len(), |i| start + i);
        let line = &block[start..end];
        match parse_line(line) {
            Ok(Some(v)) => put(v),
            Ok(None) => {}
            Err(e) => return Err(bad_line(lines, e, line)),
        }
        start = end + 1;
    }
    Ok(lines)
}

/// How eight lines are read at once: with AVX-512 where the CPU has it (F, BW and DQ; with
/// VBMI and VBMI2 too, a faster way), else not at all (one line at a time, by
/// [`quick_line`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Eights {
    None,
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx512Vbmi,
}

impl Eights {
    fn detect() -> Eights {
        // The core's detection, once for the process, lowered by NEARDUP_CPU as the
        // core's own kernels are.
        #[cfg(target_arch = "x86_64")]
        {
            let has = neardup::arch::features();
            if has.avx512f() && has.avx512dq() && has.avx512bw() {
                if has.avx512vbmi() && has.avx512vbmi2() {
                    return Eights::Avx512Vbmi;
                }
                return Eights::Avx512;
            }
        }
        Eights::None
    }

    /// The eight lines at `start` of `b` into `values`, and where the line after them
    /// starts, when each is 1 to 20 digits, a value below 2^64 and a newline; `None` for
    /// anything else (which [`quick_line`] and [`parse_line`] then read, or refuse).
    #[inline]
    fn parse(self, b: &[u8], start: usize, values: &mut [u64; 8]) -> Option<usize> {
        match self {
            Eights::None => {
                // Where no wide way is compiled in, the arguments go unused.
                let _ = (b, start, values);
                None
            }
            // SAFETY: `detect` chose this only where the CPU has AVX-512F, BW and DQ.
            #[cfg(target_arch = "x86_64")]
            Eights::Avx512 => unsafe { eight_lines_avx512(b, start, values) },
            // SAFETY: `detect` chose this only where the CPU has VBMI and VBMI2 as well.
            #[cfg(target_arch = "x86_64")]
            Eights::Avx512Vbmi => unsafe { eight_lines_vbmi(b, start, values) },
        }
    }
}

/// [`Eights::parse`] with AVX-512: the newlines of the next 192 bytes found by compares,
/// each line's last 24 bytes gathered into three 64-bit lanes (the digits right-aligned
/// against the newline, the bytes before the line masked off as leading zeros), checked to
/// be digits, and turned into numbers by multiply-adds, all eight lines at once. Lines at
/// the block's first 24 bytes or its last 192 are left to the scalar reader.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
fn eight_lines_avx512(b: &[u8], start: usize, values: &mut [u64; 8]) -> Option<usize> {
    use std::arch::x86_64::*;

    // The gathers read up to 24 bytes before a line's newline, the compares 192 bytes from
    // `start`: both within this window.
    let window = b.get(start.checked_sub(24)?..start.checked_add(192)?)?;
    let nl = _mm512_set1_epi8(b'\n' as i8);
    let mut ends = [0u64; 8];
    let mut n = 0;
    for (k, chunk) in window[24..].chunks_exact(64).enumerate() {
        // SAFETY: a chunk is 64 readable bytes.
        let bytes = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
        let mut m = _mm512_cmpeq_epi8_mask(bytes, nl);
        while m != 0 && n < 8 {
            ends[n] = (start + 64 * k) as u64 + u64::from(m.trailing_zeros());
            m &= m - 1;
            n += 1;
        }
    }
    if n < 8 {
        return None;
    }
    // SAFETY: `ends` is eight u64, 64 readable bytes.
    let end = unsafe { _mm512_loadu_si512(ends.as_ptr().cast()) };
    let len = line_lengths(start, end)?;
    // The 24 bytes before each newline, as three words: every offset is at least
    // `start - 23` (a line is at least one byte) and ends at most 192 bytes from `start`.
    let at = _mm512_sub_epi64(end, _mm512_set1_epi64(24));
    let base = b.as_ptr();
    // SAFETY: each gather reads eight bytes within `window` (above).
    let words = unsafe {
        [
            _mm512_i64gather_epi64::<1>(at, base.cast()),
            _mm512_i64gather_epi64::<1>(_mm512_add_epi64(at, _mm512_set1_epi64(8)), base.cast()),
            _mm512_i64gather_epi64::<1>(_mm512_add_epi64(at, _mm512_set1_epi64(16)), base.cast()),
        ]
    };
    *values = line_values(len, words)?;
    Some(ends[7] as usize + 1)
}

/// [`eight_lines_avx512`] with VBMI and VBMI2, in less than half its time (`find-all`
/// reading a million fingerprints: 5.6 → 4.7 ms): the newlines' offsets compressed into a
/// register instead of written out one by one and read back (a store the load cannot take
/// from, a sixth of the time), and each line's last 24 bytes picked out of the window by
/// byte permutes instead of gathers (a third of the time).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vbmi,avx512vbmi2")]
fn eight_lines_vbmi(b: &[u8], start: usize, values: &mut [u64; 8]) -> Option<usize> {
    use std::arch::x86_64::*;

    // The permutes pick up to 24 bytes before a line's newline, the compares look 192 bytes
    // from `start`: both within this window of 216.
    let window = b.get(start.checked_sub(24)?..start.checked_add(192)?)?;
    let nl = _mm512_set1_epi8(b'\n' as i8);
    // The offsets of the first eight newlines in the window (24 to 215, a byte each), in
    // the low bytes: each chunk's compressed, then expanded in after those found before.
    let iota = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
        40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
        17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
    );
    let mut offsets = _mm512_setzero_si512();
    let mut n = 0;
    for (k, chunk) in window[24..].chunks_exact(64).enumerate() {
        // SAFETY: a chunk is 64 readable bytes.
        let bytes = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
        let m = _mm512_cmpeq_epi8_mask(bytes, nl);
        let at = _mm512_add_epi8(iota, _mm512_set1_epi8((24 + 64 * k) as u8 as i8));
        let found = _mm512_maskz_compress_epi8(m, at);
        // Fewer than eight found so far: the shift is below 64.
        offsets = _mm512_or_si512(offsets, _mm512_maskz_expand_epi8(u64::MAX << n, found));
        n += m.count_ones();
        if n >= 8 {
            break;
        }
    }
    if n < 8 {
        return None;
    }
    let first = _mm512_castsi512_si128(offsets);
    let in_window = _mm512_cvtepu8_epi64(first);
    let end = _mm512_add_epi64(in_window, _mm512_set1_epi64(start as i64 - 24));
    let len = line_lengths(start, end)?;
    // SAFETY: the window holds 216 bytes: three loads of 64, and 24 under a mask.
    let (r0, r1, r2, r3) = unsafe {
        let p = window.as_ptr();
        (
            _mm512_loadu_si512(p.cast()),
            _mm512_loadu_si512(p.add(64).cast()),
            _mm512_loadu_si512(p.add(128).cast()),
            _mm512_maskz_loadu_epi8((1 << 24) - 1, p.add(192).cast()),
        )
    };
    // Each newline's offset in every byte of its lane (the shuffle copies byte 0 of each
    // lane within 16-byte halves).
    const HALF: i64 = 0x0808_0808_0808_0808;
    let spread = _mm512_shuffle_epi8(
        in_window,
        _mm512_set_epi64(HALF, 0, HALF, 0, HALF, 0, HALF, 0),
    );
    // Byte `j` of word `w` of a line is window byte `e + 8 w + j - 24`, `e` its newline's
    // offset: 0 to 214, within the window as the newline is at least 24 bytes in. Bytes
    // from 128 on come from the second pair of registers.
    let word = |w: i8| {
        let from_end = [0i8, 1, 2, 3, 4, 5, 6, 7].map(|j| (8 * w + j - 24) as u8);
        let idx = _mm512_add_epi8(spread, _mm512_set1_epi64(i64::from_le_bytes(from_end)));
        let low = _mm512_permutex2var_epi8(r0, idx, r1);
        let high = _mm512_permutex2var_epi8(r2, idx, r3);
        _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high)
    };
    *values = line_values(len, [word(0), word(1), word(2)])?;
    Some(start - 24 + usize::from(_mm_extract_epi8::<7>(first) as u8) + 1)
}

/// The lengths of the eight lines that end at the newlines `end` (offsets into the input),
/// the first starting at `start`; `None` unless each is 1 to 20 bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
#[inline]
fn line_lengths(
    start: usize,
    end: std::arch::x86_64::__m512i,
) -> Option<std::arch::x86_64::__m512i> {
    use std::arch::x86_64::*;

    let splat = |x: u64| _mm512_set1_epi64(x as i64);
    // Each line starts after the newline before it; the first at `start`.
    let before = _mm512_alignr_epi64::<7>(end, splat(start as u64 - 1));
    let len = _mm512_sub_epi64(end, _mm512_add_epi64(before, splat(1)));
    let good_len = _mm512_cmpge_epu64_mask(len, splat(1)) & _mm512_cmple_epu64_mask(len, splat(20));
    (good_len == 0xFF).then_some(len)
}

/// The values of eight lines of `len` bytes, given the 24 bytes before each one's newline
/// as three words; `None` unless each is all digits and below 2^64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
#[inline]
fn line_values(
    len: std::arch::x86_64::__m512i,
    words: [std::arch::x86_64::__m512i; 3],
) -> Option<[u64; 8]> {
    use std::arch::x86_64::*;

    let splat = |x: u64| _mm512_set1_epi64(x as i64);
    // Word `w` keeps its bytes that lie within the line, the last `len` of the 24: those
    // from byte `8 (3 - w) - len` on (shifts of 64 or more keep none).
    let ones = splat(u64::MAX);
    let eight = |w: u64| {
        let keep = _mm512_sllv_epi64(
            ones,
            _mm512_slli_epi64::<3>(_mm512_sub_epi64(
                splat(8 * (3 - w)),
                _mm512_min_epu64(len, splat(8 * (3 - w))),
            )),
        );
        let digits = _mm512_sub_epi8(words[w as usize], _mm512_set1_epi8(b'0' as i8));
        let kept = _mm512_test_epi8_mask(keep, keep);
        let bad = _mm512_mask_cmpgt_epu8_mask(kept, digits, _mm512_set1_epi8(9));
        let digits = _mm512_and_si512(digits, keep);
        // Pairs of digits (the first in the lower byte is the higher), then fours, then
        // the eight.
        let pairs = _mm512_maddubs_epi16(digits, _mm512_set1_epi16(0x010A));
        let fours = _mm512_madd_epi16(pairs, _mm512_set1_epi32(0x0001_0064));
        let value = _mm512_add_epi64(
            _mm512_mul_epu32(fours, splat(10_000)),
            _mm512_srli_epi64::<32>(fours),
        );
        (value, bad)
    };
    let (high, bad0) = eight(0);
    let (middle, bad1) = eight(1);
    let (low, bad2) = eight(2);
    if bad0 | bad1 | bad2 != 0 {
        return None;
    }
    // Below 10^16, and `high` is at most four digits: the value is `high · 10^16 + rest`,
    // above 2^64 − 1 = 1844 · 10^16 + 6744073709551615 exactly when `high` is too.
    let rest = _mm512_add_epi64(_mm512_mul_epu32(middle, splat(100_000_000)), low);
    let over = _mm512_cmpgt_epu64_mask(high, splat(1844))
        | (_mm512_cmpeq_epu64_mask(high, splat(1844))
            & _mm512_cmpgt_epu64_mask(rest, splat(6_744_073_709_551_615)));
    if over != 0 {
        return None;
    }
    let value = _mm512_add_epi64(_mm512_mullo_epi64(high, splat(10u64.pow(16))), rest);
    let mut values = [0u64; 8];
    // SAFETY: `values` is eight u64, 64 writable bytes.
    unsafe { _mm512_storeu_si512(values.as_mut_ptr().cast(), value) };
    Some(values)
}

/// A bad line as reported: its number in the block, why, and its first 60 characters.
fn bad_line(number: u64, why: LineError, line: &[u8]) -> BadLine {
    let shown = String::from_utf8_lossy(line.trim_ascii());
    (number, why, shown.chars().take(60).collect())
}

/// Reads every fingerprint of `source`, reporting bytes read to `progress`. Blocks of
/// lines are parsed in parallel, a wave at a time, and joined in input order. A mapped
/// file is parsed where it lies; other input is read into reused block buffers.
pub fn read_decimal(mut source: Source, progress: &dyn Progress) -> Result<Vec<u64>, Error> {
    progress.phase("reading", source.len);
    let wave = rayon::current_num_threads().max(1) * 2;
    let mut joined = Joined {
        // About 20 bytes a line: reserve once instead of growing through copies.
        out: Vec::with_capacity(source.len.map_or(1 << 16, |n| (n / 17) as usize + 16)),
        lines_before: 0,
        name: &source.name,
    };
    if let Some(map) = source.map.take() {
        let (mut at, mut released) = (0, 0);
        while at < map.len() {
            let mut blocks: Vec<&[u8]> = Vec::with_capacity(MAPPED_WAVE * wave);
            while blocks.len() < MAPPED_WAVE * wave && at < map.len() {
                let end = block_end(&map, at, MAPPED_BLOCK);
                blocks.push(&map[at..end]);
                at = end;
            }
            // The parsed pages leave this process's resident memory (they stay in the page
            // cache), so that reading a large file holds a wave of it, not all of it: each
            // block's own pages by the thread that parsed it (on the main thread, a
            // megabyte and a half of pages alone was 1.1-1.7 ms of a million lines), the
            // pages two blocks share once the wave is done.
            let base = map.as_ptr() as usize;
            joined.add_then(&blocks, |b| {
                let from = b.as_ptr() as usize - base;
                release(&map, from, from + b.len());
            })?;
            progress.set(at as u64);
            release(&map, released, at);
            released = at / PAGE * PAGE;
        }
        return Ok(joined.out);
    }
    // Block buffers are reused from wave to wave: no page faults or zeroing per block.
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut carry: Vec<u8> = Vec::new();
    let mut read_total = 0u64;
    let mut eof = false;
    while !eof {
        // A wave of blocks, each ending with a newline but the last one of the input.
        let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(wave);
        while blocks.len() < wave && !eof {
            let mut block = pool.pop().unwrap_or_default();
            block.clear();
            block.append(&mut carry);
            let n = (&mut source.reader)
                .take(BLOCK as u64)
                .read_to_end(&mut block)
                .map_err(|error| Error::Read {
                    name: source.name.clone(),
                    error,
                })?;
            read_total += n as u64;
            progress.set(read_total);
            if n < BLOCK {
                eof = true;
            } else {
                match memchr::memrchr(b'\n', &block) {
                    Some(i) => {
                        carry.extend_from_slice(&block[i + 1..]);
                        block.truncate(i + 1);
                    }
                    None => {
                        // One line longer than a block: keep reading it.
                        carry = block;
                        continue;
                    }
                }
            }
            blocks.push(block);
        }
        joined.add(&blocks)?;
        pool.append(&mut blocks);
    }
    Ok(joined.out)
}

/// Bytes of a mapped file parsed by one task: a block costs no buffer there, so blocks
/// are smaller than [`BLOCK`], and the threads' shares of a wave come out even (three
/// blocks of 8 MB on two threads left one thread a third of the time alone).
const MAPPED_BLOCK: usize = 1 << 20;

/// Blocks of a mapped file in a wave, per thread.
const MAPPED_WAVE: usize = 8;

/// The fingerprints of the blocks parsed so far, in input order.
struct Joined<'a> {
    out: Vec<u64>,
    /// Lines in those blocks, for numbering a bad line.
    lines_before: u64,
    /// The input's name, for messages.
    name: &'a str,
}

impl Joined<'_> {
    /// Appends the fingerprints of a wave of blocks, or reports the first bad line among
    /// them. Each block is parsed in parallel straight into its own stretch of the output,
    /// as long as its lines: no vector per block, and no copy to join them but to close
    /// the gaps that blank lines leave.
    fn add<B: AsRef<[u8]> + Sync>(&mut self, blocks: &[B]) -> Result<(), Error> {
        self.add_then(blocks, |_| {})
    }

    /// [`Joined::add`], calling `parsed` with each block once the thread that parsed it is
    /// done with it.
    fn add_then<B: AsRef<[u8]> + Sync>(
        &mut self,
        blocks: &[B],
        parsed: impl Fn(&[u8]) + Sync,
    ) -> Result<(), Error> {
        use rayon::prelude::*;

        let room: Vec<usize> = blocks.par_iter().map(|b| line_count(b.as_ref())).collect();
        let base = self.out.len();
        self.out.reserve(room.iter().sum());
        let mut slots = Vec::with_capacity(blocks.len());
        let mut rest = self.out.spare_capacity_mut();
        for &n in &room {
            let (slot, after) = rest.split_at_mut(n);
            slots.push(slot);
            rest = after;
        }
        let parsed: Vec<Result<(usize, u64), BadLine>> = blocks
            .par_iter()
            .zip(slots)
            .map(|(b, slot)| {
                let mut written = 0;
                // A line gives at most one value, and the slot has room for every line.
                let lines = parse_block(b.as_ref(), |v| {
                    slot[written].write(v);
                    written += 1;
                });
                parsed(b.as_ref());
                Ok((written, lines?))
            })
            .collect();
        let spare = self.out.spare_capacity_mut();
        let (mut len, mut from) = (0, 0);
        for (result, n) in parsed.into_iter().zip(room) {
            match result {
                Ok((written, lines)) => {
                    if from != len {
                        spare.copy_within(from..from + written, len);
                    }
                    len += written;
                    from += n;
                    self.lines_before += lines;
                }
                Err((line, why, shown)) => {
                    return Err(Error::Decimal {
                        name: self.name.into(),
                        line: self.lines_before + line,
                        shown,
                        why,
                    });
                }
            }
        }
        // SAFETY: the first `len` values past `base` are the values the blocks wrote, moved
        // together in order: each block wrote the first `written` of its slot, and each
        // move reads only those and writes at or below them.
        unsafe { self.out.set_len(base + len) };
        Ok(())
    }
}

/// How a fingerprint file is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// One decimal per line, or raw u64 when the file says so ([`Format::detect`]).
    #[default]
    Auto,
    /// One decimal u64 per line (simhash-cpp's format).
    Decimal,
    /// Raw little-endian u64, eight bytes each: a billion fingerprints in 8 GB, read
    /// where they lie.
    U64,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "decimal" => Ok(Format::Decimal),
            "u64" => Ok(Format::U64),
            _ => Err(format!("expected auto, decimal or u64, got '{s}'")),
        }
    }
}

impl Format {
    /// The format of `path` (`-`: standard input, decimal): as named, or for
    /// [`Format::Auto`] raw u64 when the name ends in `.u64`, or when the file's length is
    /// a multiple of 8 and its first 64 bytes hold a byte no decimal text has (a control
    /// byte other than white space, or one above ASCII). Random fingerprints all but never
    /// start with 64 bytes of digits and white space; a decimal file with a stray letter
    /// stays decimal, and its error names the line.
    pub fn detect(self, path: &str) -> Format {
        if self != Format::Auto {
            return self;
        }
        if path == "-" {
            return Format::Decimal;
        }
        if path.ends_with(".u64") {
            return Format::U64;
        }
        let mut head = [0u8; 64];
        let Ok(mut file) = File::open(path) else {
            return Format::Decimal;
        };
        let len = file.metadata().map_or(0, |m| m.len());
        let read = file.read(&mut head).unwrap_or(0);
        let binary = head[..read]
            .iter()
            .any(|&b| b >= 0x80 || (b < 0x20 && !b"\t\n\r".contains(&b)));
        if len > 0 && len % 8 == 0 && binary {
            Format::U64
        } else {
            Format::Decimal
        }
    }
}

/// A file of raw little-endian u64, mapped: its values read where they lie, without a
/// copy (on a little-endian machine).
pub struct U64File {
    map: Option<memmap2::Mmap>,
    /// The values, on a big-endian machine, or of a file too small to map.
    owned: Vec<u64>,
}

impl U64File {
    /// Maps `path`; an error names it when it cannot be read or its length is not a
    /// multiple of 8 bytes.
    pub fn open(path: &str) -> Result<U64File, Error> {
        let open = |error| Error::Open {
            path: path.into(),
            error,
        };
        let file = File::open(path).map_err(open)?;
        let meta = file.metadata().map_err(open)?;
        if meta.is_dir() {
            return Err(Error::IsDirectory { path: path.into() });
        }
        let len = usize::try_from(meta.len()).unwrap_or(usize::MAX);
        if len % 8 != 0 {
            return Err(Error::NotU64 {
                path: path.into(),
                len,
            });
        }
        if cfg!(target_endian = "little") && len > 0 {
            // SAFETY: a private, read-only mapping; another process truncating the file
            // meanwhile ends this one (SIGBUS), as for any program that maps its input.
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(open)?;
            #[cfg(unix)]
            let _ = map.advise(memmap2::Advice::Sequential);
            return Ok(U64File {
                map: Some(map),
                owned: Vec::new(),
            });
        }
        Ok(U64File {
            map: None,
            owned: read_u64_le(path)?,
        })
    }

    /// The values.
    pub fn values(&self) -> &[u64] {
        match &self.map {
            Some(map) => {
                let bytes: &[u8] = map;
                // SAFETY: every bit pattern is a u64. The mapping starts on a page, so on a
                // u64, and its length is a multiple of 8 (checked on opening), so nothing
                // is left over; on this little-endian machine the bytes of each u64 are
                // its little-endian encoding.
                let (head, values, tail) = unsafe { bytes.align_to::<u64>() };
                debug_assert!(head.is_empty() && tail.is_empty());
                values
            }
            None => &self.owned,
        }
    }
}

/// Reads little-endian u64 values (the peers' `.u64` workload files).
pub fn read_u64_le(path: &str) -> Result<Vec<u64>, Error> {
    let bytes = std::fs::read(path).map_err(|error| Error::ReadFile {
        path: path.into(),
        error,
    })?;
    if bytes.len() % 8 != 0 {
        return Err(Error::NotU64 {
            path: path.into(),
            len: bytes.len(),
        });
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect())
}

/// One line of `neardup fingerprint` output, `{"id", "fingerprint"}` (the fingerprint a
/// decimal string or a number; the id any JSON value but null): `None` for a blank line,
/// or why the line is not one. The id comes as [`id_text`] gives it.
pub fn parse_fingerprint_line(line: &str) -> Result<Option<(String, u64)>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let fp = match v.get("fingerprint") {
        // Digits only, as `neardup fingerprint` writes them (Rust's parser takes a `+`).
        Some(Value::String(s)) if s.bytes().all(|b| b.is_ascii_digit()) => s.parse::<u64>().ok(),
        Some(Value::Number(x)) => x.as_u64(),
        _ => None,
    }
    .ok_or("no \"fingerprint\" that is a u64 (decimal string or number)")?;
    match v.get("id") {
        Some(id) if !id.is_null() => Ok(Some((id_text(id), fp))),
        _ => Err("no \"id\"".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoProgress;
    use proptest::prelude::*;

    #[test]
    fn parses_strictly() {
        assert_eq!(parse_line(b"0"), Ok(Some(0)));
        assert_eq!(parse_line(b"  42\r"), Ok(Some(42)));
        assert_eq!(parse_line(b"007"), Ok(Some(7)));
        assert_eq!(parse_line(b""), Ok(None));
        assert_eq!(parse_line(b" \t"), Ok(None));
        assert_eq!(parse_line(b"18446744073709551615"), Ok(Some(u64::MAX)));
        assert_eq!(
            parse_line(b"18446744073709551616"),
            Err(LineError::TooLarge)
        );
        assert_eq!(
            parse_line(b"99999999999999999999999"),
            Err(LineError::TooLarge)
        );
        assert_eq!(parse_line(b"-1"), Err(LineError::Sign));
        assert_eq!(parse_line(b"+1"), Err(LineError::Sign));
        assert_eq!(parse_line(b"13x"), Err(LineError::NotDigit(b'x')));
        assert_eq!(parse_line(b"1 2"), Err(LineError::NotDigit(b' ')));
        assert_eq!(parse_line(b"0x1f"), Err(LineError::NotDigit(b'x')));
    }

    /// [`parse_block`]'s values collected, with its line count, which is
    /// [`line_count`]'s.
    fn parse_block_vec(block: &[u8]) -> Result<(Vec<u64>, u64), BadLine> {
        let mut out = Vec::new();
        let lines = parse_block(block, |v| out.push(v))?;
        assert_eq!(lines as usize, line_count(block));
        Ok((out, lines))
    }

    /// Eight bytes as their number when all are digits.
    fn eight(x: u64) -> Option<u64> {
        (non_digits(x) == 0).then(|| eight_value(x))
    }

    /// [`parse_block`] a line at a time: every line cut at its newline and read by
    /// [`parse_line`].
    fn parse_block_by_lines(block: &[u8]) -> Result<(Vec<u64>, u64), BadLine> {
        let mut out = Vec::new();
        let mut lines = 0;
        let body = block.strip_suffix(b"\n").unwrap_or(block);
        if block.is_empty() {
            return Ok((out, 0));
        }
        for line in body.split(|&b| b == b'\n') {
            lines += 1;
            match parse_line(line) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => {}
                Err(e) => return Err(bad_line(lines, e, line)),
            }
        }
        Ok((out, lines))
    }

    /// Lines of a fingerprint list: mostly fingerprints, of every length, the largest
    /// values included; blank lines, white space around digits, and bad lines.
    fn lines(most: usize) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(
            prop_oneof![
                any::<u64>().prop_map(|v| v.to_string()),
                (0u32..20).prop_map(|d| (u64::MAX - u64::from(d)).to_string()),
                Just(String::new()),
                "[0-9]{0,25}",
                "[ ]?[0-9]{1,21}[\r ]?",
                "[0-9]{0,21}[/:a+\u{0}\u{80}-][0-9]{0,21}",
            ],
            0..most,
        )
    }

    /// Lines of a fingerprint list as files hold them: nearly all fingerprints, short and
    /// long, with leading zeros, at and past the largest value, now and then one that is
    /// not (blank, CRLF, padded, too long, a stray byte), so that runs of eight good lines
    /// are common and end at every kind of line.
    fn mostly_good_lines(most: usize) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(
            prop_oneof![
                12 => any::<u64>().prop_map(|v| v.to_string()),
                3 => (0u64..1000).prop_map(|v| v.to_string()),
                2 => (0u64..20).prop_map(|d| (u64::MAX - d).to_string()),
                2 => (1u128..20).prop_map(|d| (u128::from(u64::MAX) + d).to_string()),
                2 => ("0{1,6}", any::<u64>()).prop_map(|(z, v)| format!("{z}{v}")),
                // Zero-padded to 20 digits, the most read at once, and to 21–23.
                3 => (20usize..24, any::<u64>()).prop_map(|(w, v)| format!("{v:0>w$}")),
                1 => "[0-9]{1,22}",
                1 => prop_oneof![
                    Just(String::new()),
                    "[0-9]{1,20}\r",
                    " [0-9]{1,20}",
                    "[0-9]{0,10}[/:a+\u{0}\u{80}-][0-9]{0,10}",
                ],
            ],
            0..most,
        )
    }

    /// Every way of reading eight lines at once that this CPU has.
    fn wide_ways() -> Vec<Eights> {
        let best = Eights::detect();
        #[cfg(target_arch = "x86_64")]
        if best == Eights::Avx512Vbmi {
            return vec![Eights::Avx512, best];
        }
        [best].into_iter().filter(|&e| e != Eights::None).collect()
    }

    /// What [`Eights::parse`] should give at `start`: the eight lines from there, when
    /// each is 1 to 20 digits below 2^64 and ends with a newline.
    fn eight_by_lines(text: &[u8], start: usize) -> Option<(Vec<u64>, usize)> {
        let mut values = Vec::new();
        let mut at = start;
        for _ in 0..8 {
            let len = memchr::memchr(b'\n', &text[at..])?;
            let line = &text[at..at + len];
            if !(1..=20).contains(&len) || !line.iter().all(u8::is_ascii_digit) {
                return None;
            }
            values.push(parse_line(line).ok()??);
            at += len + 1;
        }
        Some((values, at))
    }

    proptest! {
        // Eight good lines in a row with a rare one among them (zero-padded to 21 digits)
        // take more cases than the default to come up.
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Eight lines at once read as they read one at a time, by every way this CPU
        /// has, and are refused only where one of them is not a plain fingerprint line,
        /// or where the bytes around them are too few.
        #[test]
        fn eight_lines_read_as_their_lines(
            before in 0usize..40,
            lines in mostly_good_lines(12),
            after in 0usize..200,
        ) {
            let mut text = b"7".repeat(before);
            text.push(b'\n');
            let start = text.len();
            for l in &lines {
                text.extend_from_slice(l.as_bytes());
                text.push(b'\n');
            }
            text.extend(std::iter::repeat_n(b'5', after));
            let want = eight_by_lines(&text, start);
            let room = start >= 24 && start + 192 <= text.len();
            for eights in wide_ways() {
                let mut values = [0u64; 8];
                match eights.parse(&text, start, &mut values) {
                    Some(next) => prop_assert_eq!(Some((values.to_vec(), next)), want.clone()),
                    None => prop_assert!(want.is_none() || !room, "refused {:?}", want),
                }
            }
        }

        #[test]
        fn blocks_of_mostly_fingerprints_read_as_their_lines(
            lines in mostly_good_lines(200),
            last_newline in any::<bool>(),
        ) {
            let mut block = lines.join("\n").into_bytes();
            if last_newline && !block.is_empty() {
                block.push(b'\n');
            }
            prop_assert_eq!(parse_block_vec(&block), parse_block_by_lines(&block));
        }
    }

    proptest! {
        #[test]
        fn blocks_read_as_their_lines(lines in lines(60), last_newline in any::<bool>()) {
            let mut block = lines.join("\n").into_bytes();
            if last_newline && !block.is_empty() {
                block.push(b'\n');
            }
            prop_assert_eq!(parse_block_vec(&block), parse_block_by_lines(&block));
        }

        #[test]
        fn non_digits_marks_each_byte(bytes in prop::array::uniform8(any::<u8>())) {
            let mask = non_digits(u64::from_le_bytes(bytes));
            for (i, b) in bytes.iter().enumerate() {
                prop_assert_eq!(mask >> (8 * i + 7) & 1 == 1, !b.is_ascii_digit());
            }
            prop_assert_eq!(mask & 0x7F7F_7F7F_7F7F_7F7F, 0);
        }
    }

    #[test]
    fn blocks_count_lines() {
        assert_eq!(parse_block_vec(b"1\n\n2\n"), Ok((vec![1, 2], 3)));
        assert_eq!(parse_block_vec(b"1\n2"), Ok((vec![1, 2], 2)));
        assert_eq!(parse_block_vec(b""), Ok((vec![], 0)));
        assert_eq!(
            parse_block_vec(b"1\n\nx9\n"),
            Err((3, LineError::NotDigit(b'x'), "x9".into()))
        );
    }

    #[test]
    fn blocks_end_after_a_newline() {
        let mut b = vec![b'1'; 10];
        b.push(b'\n');
        assert_eq!(block_end(&b, 0, BLOCK), b.len());
        // A line longer than a block ends its block; the block after it starts a line.
        let mut b = vec![b' '; BLOCK + 100];
        b.extend_from_slice(b"7\n8\n9");
        assert_eq!(block_end(&b, 0, BLOCK), BLOCK + 102);
        assert_eq!(block_end(&b, BLOCK + 102, BLOCK), b.len());
        // The last newline within a block.
        b[BLOCK / 2] = b'\n';
        assert_eq!(block_end(&b, 0, BLOCK), BLOCK / 2 + 1);
        // No newline after the block's start: the rest is one line.
        let b = vec![b'2'; BLOCK + 5];
        assert_eq!(block_end(&b, 0, BLOCK), b.len());
    }

    proptest! {
        /// Waves of blocks cut anywhere between lines, blank lines among them: the values
        /// in order, wave after wave, as the lines give them, and a bad line numbered
        /// from the input's start.
        #[test]
        fn waves_join_as_their_lines(
            lines in lines(80),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
            wave in 1usize..4,
        ) {
            let text: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
            // Blocks end after a newline, at the cuts.
            let ends: Vec<usize> = text.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1).collect();
            let mut at: Vec<usize> = cuts.iter().filter(|_| !ends.is_empty()).map(|c| ends[c.index(ends.len())]).collect();
            at.push(text.len());
            at.sort_unstable();
            at.dedup();
            let mut blocks = Vec::new();
            let mut start = 0;
            for &end in &at {
                blocks.push(&text[start..end]);
                start = end;
            }
            let mut joined = Joined { out: vec![7], lines_before: 0, name: "t" };
            let got = blocks.chunks(wave).try_for_each(|w| joined.add(w));
            match (got, parse_block_by_lines(&text)) {
                (Ok(()), Ok((values, n))) => {
                    prop_assert_eq!(&joined.out[..1], &[7]);
                    prop_assert_eq!(&joined.out[1..], &values[..]);
                    prop_assert_eq!(joined.lines_before, n);
                }
                (Err(e), Err((n, _, _))) => {
                    let message = format!("{e:#}");
                    prop_assert!(message.starts_with(&format!("t:{n}: ")), "{}", message);
                }
                (got, want) => prop_assert!(false, "{:?} against {:?}", got.err().map(|e| format!("{e:#}")), want),
            }
        }
    }

    #[test]
    fn reads_across_blocks_with_exact_line_numbers() {
        // More than a wave of blocks, then a bad line far in.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fps.txt");
        let mut text = String::new();
        let mut expected = Vec::new();
        let mut i = 0u64;
        while text.len() < 5 * BLOCK {
            let v = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            text.push_str(&v.to_string());
            text.push_str(if i.is_multiple_of(7) { "\r\n\n" } else { "\n" });
            expected.push(v);
            i += 1;
        }
        let lines = text.matches('\n').count();
        std::fs::write(&path, &text).unwrap();
        let p = path.to_str().unwrap();
        // Mapped, and read through buffers as a pipe is.
        let open = |mapped: bool| {
            let mut source = Source::open(p).unwrap();
            assert!(source.map.is_some());
            if !mapped {
                source.map = None;
            }
            source
        };
        for mapped in [true, false] {
            let got = read_decimal(open(mapped), &NoProgress).unwrap();
            assert_eq!(got, expected, "mapped {mapped}");
        }

        text.push_str("12a\n");
        std::fs::write(&path, &text).unwrap();
        for mapped in [true, false] {
            let err = read_decimal(open(mapped), &NoProgress).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "{p}:{}: not a decimal u64: \"12a\" (unexpected character 'a')",
                    lines + 1
                ),
                "mapped {mapped}"
            );
        }
    }

    proptest! {
        #[test]
        fn round_trips(v in any::<u64>()) {
            prop_assert_eq!(parse_line(v.to_string().as_bytes()), Ok(Some(v)));
        }

        #[test]
        fn agrees_with_std_on_digit_strings(s in "[0-9]{1,25}") {
            prop_assert_eq!(parse_line(s.as_bytes()).ok().flatten(), s.parse::<u64>().ok());
        }

        #[test]
        fn eight_at_a_time_agrees_with_one_at_a_time(
            s in "[ \t]?[0-9]{0,21}[0-9/:a+\u{0}\u{ff}\n-]?[0-9]{0,21}[ \r]?"
        ) {
            // Digits with at most one byte that is not one anywhere among them, each length
            // across the eight-byte chunks.
            let b = s.as_bytes();
            prop_assert_eq!(parse_line(b), parse_scalar(b.trim_ascii()));
        }

        #[test]
        fn eight_reads_every_byte(digits_in in prop::array::uniform8(b'0'..=b'9'), at in 0usize..8, bad in any::<u8>()) {
            let mut b = digits_in;
            let plain = |b: &[u8; 8]| b.iter().try_fold(0u64, |v, &c| c.is_ascii_digit().then(|| v * 10 + u64::from(c - b'0')));
            prop_assert_eq!(eight(u64::from_le_bytes(b)), plain(&b));
            b[at] = bad;
            prop_assert_eq!(eight(u64::from_le_bytes(b)), plain(&b));
        }
    }
}

//! The common JSON line, read by hand: an object of only the id and text fields
//! (`{"id": "…", "text": "…"}`, either order), the text's escapes decoded in one pass.
//!
//! Anything else (another field, a repeated one, an escaped key, an id that is not a string
//! or a plain non-negative integer, anything malformed) is `None`, and the caller falls
//! back to [`super::fast_record`], which parses exactly as `serde_json::Value` does. What
//! this accepts it decodes as `Value` would (tested against [`super::record`]), so the
//! fallback decides every unusual case, and every error message.

use std::borrow::Cow;

use serde_json::Value;

/// The id (if present) and text of `line` when it is the common shape, else `None`.
pub fn simple_record<'a>(
    line: &'a str,
    text_field: &str,
    id_field: &str,
) -> Option<(Option<Value>, Cow<'a, str>)> {
    fields(line, text_field, id_field, true)
}

/// The id (if present) of `line` when it is the common shape, else `None`: as
/// [`simple_record`], the text checked as JSON but not decoded, for a pass that needs the
/// ids alone.
pub fn simple_id(line: &str, text_field: &str, id_field: &str) -> Option<Option<Value>> {
    fields(line, text_field, id_field, false).map(|(id, _)| id)
}

/// [`simple_record`], the text decoded when `keep_text`, else checked and left empty.
fn fields<'a>(
    line: &'a str,
    text_field: &str,
    id_field: &str,
    keep_text: bool,
) -> Option<(Option<Value>, Cow<'a, str>)> {
    let b = line.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let (mut id, mut text) = (None, None);
    loop {
        i = skip_ws(b, i + 1);
        // A key without escapes (an escaped key could still name a field: the fallback
        // decides).
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let end = special(b, i + 1)?;
        if b[end] != b'"' {
            return None;
        }
        let key = &b[i + 1..end];
        i = skip_ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        // The text wins a key that names both fields, as in `record`.
        if key == text_field.as_bytes() && text.is_none() && b.get(i) == Some(&b'"') {
            let (s, end) = if keep_text {
                string(line, i + 1)?
            } else {
                (Cow::Borrowed(""), skip_string(line, i + 1)?)
            };
            text = Some(s);
            i = end;
        } else if key == id_field.as_bytes() && key != text_field.as_bytes() && id.is_none() {
            let (v, end) = id_value(line, i)?;
            id = Some(v);
            i = end;
        } else {
            return None;
        }
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => {}
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_ws(b, i + 1) != b.len() {
        return None;
    }
    Some((id, text?))
}

/// The index of the first byte at or after `i` that is not JSON white space.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// An id: a string, or an integer that `Value` holds as a `u64` (no sign, fraction or
/// exponent, at most 19 digits, so it fits); and the index after it.
fn id_value(line: &str, i: usize) -> Option<(Value, usize)> {
    let b = line.as_bytes();
    match *b.get(i)? {
        b'"' => {
            let (s, end) = string(line, i + 1)?;
            Some((Value::String(s.into_owned()), end))
        }
        b'0'..=b'9' => {
            let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            // Leading zeros are not JSON.
            if digits > 19 || (digits > 1 && b[i] == b'0') {
                return None;
            }
            let end = i + digits;
            if !matches!(b.get(end), Some(b' ' | b'\t' | b'\n' | b'\r' | b',' | b'}')) {
                return None;
            }
            let n: u64 = line.get(i..end)?.parse().ok()?;
            Some((Value::from(n), end))
        }
        _ => None,
    }
}

/// The string whose opening quote is just before `start`: its text (borrowed when it has no
/// escapes), and the index after its closing quote. `None` for a control character, an
/// unknown escape or a lone surrogate: not JSON, which the fallback reports.
fn string(line: &str, start: usize) -> Option<(Cow<'_, str>, usize)> {
    let b = line.as_bytes();
    let at = special(b, start)?;
    if b[at] == b'"' {
        return Some((Cow::Borrowed(line.get(start..at)?), at + 1));
    }
    // Escapes only shorten the text.
    let mut out = String::with_capacity(b.len().saturating_sub(start));
    out.push_str(line.get(start..at)?);
    let end = decode::<true>(line, at, &mut out)?;
    Some((Cow::Owned(out), end))
}

/// The index after the closing quote of the string whose opening quote is just before
/// `start`, checked as [`string`] checks it; `None` where it gives `None`.
fn skip_string(line: &str, start: usize) -> Option<usize> {
    decode::<false>(line, special(line.as_bytes(), start)?, &mut String::new())
}

/// Decodes the rest of a string, from its special byte `at` (see [`special`]), onto `out`
/// when `KEEP` (else only checks it); the index after the closing quote, or `None` for
/// what is not JSON.
#[inline(always)]
fn decode<const KEEP: bool>(line: &str, mut at: usize, out: &mut String) -> Option<usize> {
    let b = line.as_bytes();
    loop {
        match b[at] {
            b'"' => return Some(at + 1),
            b'\\' => {}
            _ => return None,
        }
        let e = *b.get(at + 1)?;
        // The common escapes by table: which one comes next follows no pattern, and a
        // branch on it mispredicts.
        let byte = ESCAPES[usize::from(e)];
        if byte != 0 {
            if KEEP {
                out.push(char::from(byte));
            }
            at = copy_to_special::<KEEP>(line, at + 2, out)?;
            continue;
        }
        if e != b'u' {
            return None;
        }
        let u = hex4(b, at + 2)?;
        at += 4;
        let c = if (0xD800..0xDC00).contains(&u) {
            // A surrogate pair, or nothing.
            if b.get(at + 2..at + 4)? != b"\\u" {
                return None;
            }
            let low = hex4(b, at + 4)?;
            if !(0xDC00..0xE000).contains(&low) {
                return None;
            }
            at += 6;
            char::from_u32(0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00))?
        } else {
            // `from_u32` refuses a lone trailing surrogate.
            char::from_u32(u)?
        };
        if KEEP {
            out.push(c);
        }
        at = copy_to_special::<KEEP>(line, at + 2, out)?;
    }
}

/// [`special`] from `i`, with the text passed over appended to `out` when `KEEP`.
#[inline(always)]
fn copy_to_special<const KEEP: bool>(line: &str, i: usize, out: &mut String) -> Option<usize> {
    let at = special(line.as_bytes(), i)?;
    if KEEP {
        // `at` is an ASCII byte, so a character boundary.
        out.push_str(line.get(i..at)?);
    }
    Some(at)
}

/// The byte each one-character escape stands for, by the character after the backslash; 0
/// for `u` and for what is no escape.
const ESCAPES: [u8; 256] = {
    let mut t = [0; 256];
    t[b'n' as usize] = b'\n';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b't' as usize] = b'\t';
    t[b'r' as usize] = b'\r';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t
};

/// Four hex digits at `i`, as a number.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    b.get(i..i + 4)?
        .iter()
        .try_fold(0, |n, &c| Some(n * 16 + (c as char).to_digit(16)?))
}

/// The index of the first `"`, `\` or control character (below 0x20) at or after `i`:
/// where a JSON string ends, or needs decoding, or is not JSON. Code and prose hold an
/// escape every 30 bytes or so (newlines, quotes), so the search restarts often: it looks
/// at 16 bytes at a time, and the first of them decides.
#[cfg(target_arch = "x86_64")]
fn special(b: &[u8], mut i: usize) -> Option<usize> {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    while let Some(block) = b.get(i..i + 16) {
        // SAFETY: SSE2 is part of x86_64, and the load reads the 16 bytes of `block`.
        let hits = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().cast());
            let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
            // Unsigned x ≤ 0x1f exactly when min(x, 0x1f) = x.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
        };
        if hits != 0 {
            return Some(i + hits.trailing_zeros() as usize);
        }
        i += 16;
    }
    special_bytes(b, i)
}

/// [`special`] eight bytes at a time in a `u64` (no SIMD instructions needed).
#[cfg(any(test, not(target_arch = "x86_64")))]
fn special_swar(b: &[u8], mut i: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(block) = b.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(block);
        let v = u64::from_le_bytes(w);
        // `(x - 1) & !x` has a byte's high bit set where the byte of x is zero, and only
        // borrows upward from there: the lowest marked byte is the first hit.
        let quote = v ^ (ONES * u64::from(b'"'));
        let backslash = v ^ (ONES * u64::from(b'\\'));
        let hits = ((quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (v.wrapping_sub(ONES * 0x20) & !v))
            & HIGH;
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    special_bytes(b, i)
}

#[cfg(not(target_arch = "x86_64"))]
fn special(b: &[u8], i: usize) -> Option<usize> {
    special_swar(b, i)
}

/// [`special`] a byte at a time: the definition, and the last few bytes.
fn special_bytes(b: &[u8], i: usize) -> Option<usize> {
    let rest = b.get(i..)?;
    let p = rest
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
    Some(i + p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every search finds the byte the plain loop finds, from every start.
        #[test]
        fn searches_agree(
            bytes in prop::collection::vec(
                prop_oneof![
                    4 => 0x20u8..0x7f,
                    1 => Just(b'"'),
                    1 => Just(b'\\'),
                    1 => 0u8..0x20,
                    1 => 0x80u8..=0xff,
                ],
                0..80,
            ),
        ) {
            for i in 0..=bytes.len() + 1 {
                let want = special_bytes(&bytes, i);
                prop_assert_eq!(special(&bytes, i), want);
                prop_assert_eq!(special_swar(&bytes, i), want);
            }
        }
    }
}

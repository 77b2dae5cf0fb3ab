//! Properties of the Basic Multilingual Plane's characters, tabulated a page of 256 code
//! points at a time when a text first needs one of that page: one load where the Unicode
//! tables are searched, for the loops that ask once a character.

use std::sync::OnceLock;

/// `f(c)` for every character `c` of the plane; `surrogate` for the surrogates, which no
/// `char` is.
pub(crate) struct BmpTable<T: 'static> {
    pages: [OnceLock<Box<[T; 256]>>; 256],
    f: fn(char) -> T,
    surrogate: T,
    /// The first code point of the plane: 0, or a multiple of 0x10000 for a table of
    /// another plane ([`BmpTable::of_plane`]).
    base: u32,
}

impl<T: Copy> BmpTable<T> {
    /// The table of `f`.
    pub(crate) const fn new(f: fn(char) -> T, surrogate: T) -> BmpTable<T> {
        BmpTable {
            pages: [const { OnceLock::new() }; 256],
            f,
            surrogate,
            base: 0,
        }
    }

    /// The table of `f` over plane `plane` (code points `plane << 16` on), which
    /// [`BmpTable::get`] indexes by their low 16 bits.
    pub(crate) const fn of_plane(f: fn(char) -> T, surrogate: T, plane: u8) -> BmpTable<T> {
        BmpTable {
            pages: [const { OnceLock::new() }; 256],
            f,
            surrogate,
            base: (plane as u32) << 16,
        }
    }

    /// `f` of the character `cp` (of the table's plane).
    #[inline]
    pub(crate) fn get(&self, cp: u16) -> T {
        let page = self.pages[usize::from(cp >> 8)].get_or_init(|| {
            let first = self.base + u32::from(cp & 0xFF00);
            Box::new(std::array::from_fn(|k| {
                char::from_u32(first + k as u32).map_or(self.surrogate, self.f)
            }))
        });
        page[usize::from(cp & 0xFF)]
    }

    /// `f(c)`: from the table in the plane, worked out beyond it.
    #[inline]
    pub(crate) fn of(&self, c: char) -> T {
        match u16::try_from(u32::from(c)) {
            Ok(cp) => self.get(cp),
            Err(_) => (self.f)(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_gets_its_own_value() {
        static TABLE: BmpTable<u32> = BmpTable::new(|c| u32::from(c) ^ 0x5A5A, 7);
        for cp in 0..=u16::MAX {
            let want = char::from_u32(u32::from(cp)).map_or(7, |c| u32::from(c) ^ 0x5A5A);
            assert_eq!(TABLE.get(cp), want, "{cp:#x}");
        }
        for c in ['\u{10000}', '\u{1F600}', '\u{10FFFF}'] {
            assert_eq!(TABLE.of(c), u32::from(c) ^ 0x5A5A, "{c:?}");
        }
        static PLANE: BmpTable<u32> = BmpTable::of_plane(|c| u32::from(c) ^ 0x5A5A, 7, 1);
        for cp in (0..=u16::MAX).step_by(97).chain([0, u16::MAX]) {
            let c = 0x10000 + u32::from(cp);
            assert_eq!(PLANE.get(cp), c ^ 0x5A5A, "{c:#x}");
        }
    }
}

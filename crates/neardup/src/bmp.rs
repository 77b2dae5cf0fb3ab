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
}

impl<T: Copy> BmpTable<T> {
    /// The table of `f`.
    pub(crate) const fn new(f: fn(char) -> T, surrogate: T) -> BmpTable<T> {
        BmpTable {
            pages: [const { OnceLock::new() }; 256],
            f,
            surrogate,
        }
    }

    /// `f` of the character `cp`.
    #[inline]
    pub(crate) fn get(&self, cp: u16) -> T {
        let page = self.pages[usize::from(cp >> 8)].get_or_init(|| {
            let first = u32::from(cp & 0xFF00);
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
    }
}

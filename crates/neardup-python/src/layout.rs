//! A view of the core's block layouts and table permutations (`neardup::tables`):
//! `neardup.Layout` and its `neardup.Table`s.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::convert::{fingerprint, layout};

/// The block layout for matches within `distance` bits using `blocks` blocks, as
/// simhash-py and simhash-cpp build it: block i of m covers bits [i*64//m, (i+1)*64//m),
/// and there is one `Table` per choice of `blocks - distance` leading blocks, in
/// lexicographic order (C(blocks, distance) tables).
///
/// A bad layout (`blocks` 0 or above 64, not above `distance`, or needing more than
/// 100,000 tables) raises ValueError.
///
/// >>> import neardup
/// >>> layout = neardup.Layout(2, 1)
/// >>> len(layout.tables), layout.blocks, layout.distance
/// (2, 2, 1)
/// >>> hex(layout.tables[0].permute(0x0123456789abcdef))
/// '0x89abcdef01234567'
#[pyclass(frozen, module = "neardup", name = "Layout")]
pub struct Layout {
    inner: Arc<neardup::tables::Layout>,
}

#[pymethods]
impl Layout {
    #[new]
    #[pyo3(signature = (blocks, distance))]
    fn new(blocks: &Bound<'_, PyAny>, distance: &Bound<'_, PyAny>) -> PyResult<Layout> {
        Ok(Layout {
            inner: Arc::new(layout(blocks, distance)?),
        })
    }

    /// The number of blocks.
    #[getter]
    fn blocks(&self) -> usize {
        self.inner.blocks()
    }

    /// The largest Hamming distance this layout finds.
    #[getter]
    fn distance(&self) -> u32 {
        self.inner.distance()
    }

    /// The tables, in seomoz order (a new list of `Table` views each time).
    #[getter]
    fn tables(&self) -> Vec<Table> {
        tables_of(&self.inner)
    }

    fn __len__(&self) -> usize {
        self.inner.tables().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Layout(blocks={}, distance={}) with {} tables",
            self.inner.blocks(),
            self.inner.distance(),
            self.inner.tables().len()
        )
    }
}

/// `Table` views of every table of `layout`, in order (`Layout.tables`, and the old
/// simhash-py `Corpus.tables`).
pub(crate) fn tables_of(layout: &Arc<neardup::tables::Layout>) -> Vec<Table> {
    (0..layout.tables().len())
        .map(|index| Table {
            layout: Arc::clone(layout),
            index,
        })
        .collect()
}

/// One table of a `Layout` (get them from `Layout.tables`): the permutation that moves its
/// leading blocks to the most significant end, in increasing block order, then the other
/// blocks in increasing order, keeping the bit order inside each block.
///
/// >>> import neardup
/// >>> table = neardup.Layout(4, 2).tables[1]
/// >>> table.leading_blocks, hex(table.search_mask)
/// ([0, 2], '0xffffffff00000000')
/// >>> y = table.permute(0xdeadbeefcafebabe)
/// >>> hex(y), table.unpermute(y) == 0xdeadbeefcafebabe
/// ('0xbabebeefcafedead', True)
/// >>> table.bit_map()[48]  # source bit 48 (the low bit of block 3) moves to bit 0
/// 0
#[pyclass(frozen, module = "neardup", name = "Table")]
pub struct Table {
    layout: Arc<neardup::tables::Layout>,
    /// Always a valid index into `layout.tables()`: set only by `Layout.tables`.
    index: usize,
}

impl Table {
    fn table(&self) -> &neardup::tables::Table {
        &self.layout.tables()[self.index]
    }
}

#[pymethods]
impl Table {
    /// The position of this table in its layout's `tables`.
    #[getter]
    fn index(&self) -> usize {
        self.index
    }

    /// The leading blocks, in increasing order.
    #[getter]
    fn leading_blocks(&self) -> Vec<usize> {
        self.table().leading_blocks().collect()
    }

    /// How many bits the leading blocks span.
    #[getter]
    fn leading_bits(&self) -> u32 {
        self.table().leading_bits()
    }

    /// The mask of the leading blocks in permuted space (the top `leading_bits` bits):
    /// fingerprints whose permuted values agree under it share this table's run.
    #[getter]
    fn search_mask(&self) -> u64 {
        self.table().search_mask()
    }

    /// A list of 64 ints: item i is the bit that source bit i moves to.
    fn bit_map(&self) -> Vec<u32> {
        self.table().bit_map().to_vec()
    }

    /// `x` (an int in 0..2**64-1) with the leading blocks moved to the top.
    fn permute(&self, x: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.table().permute(fingerprint(x)?))
    }

    /// The inverse of `permute`.
    fn unpermute(&self, y: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.table().unpermute(fingerprint(y)?))
    }

    fn __repr__(&self) -> String {
        format!(
            "Table(blocks={}, distance={}, index={}, leading_blocks={:?})",
            self.layout.blocks(),
            self.layout.distance(),
            self.index,
            self.table().leading_blocks().collect::<Vec<_>>()
        )
    }
}

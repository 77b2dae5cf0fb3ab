//! The levelled engine under both online indexes: [`super::Corpus`] (fingerprints, one
//! table per permutation of the layout) and [`super::BandIndex`] (band keys, one table per
//! band). What differs between them is a [`Scheme`]: what a document is indexed by, the
//! key each table takes from it, how a main part is built and searched. The rest is here,
//! once.
//!
//! A state is a [`Snap`]: a compact main part, rebuilt now and then, under small levels
//! sorted per table, by age: `frozen` (a middle level being built into the next main part
//! on another thread; usually empty), `mid` (folded into the main part when it reaches a
//! fraction of it), `low` (the top levels folded since the middle level last took them
//! in), `sealed` (a full top level being folded into the low one, or with it into the
//! middle one, on a thread of its own) and `top` (the last few writes; copied by each
//! write). The caps grow geometrically, top to low to middle ([`Engine::low_cap`]): a
//! write is copied O(top) times and merged O(sqrt(mid / top)) times, where folding every
//! top level straight into the middle one merged it O(mid / top) times (at 100M documents
//! 850 entries a table a write, against about 80). A rebuild of the main part comes once
//! per many documents. Slots number the main part's positions, then each level's documents
//! in that order; removals are tombstones (slots) until the next rebuild.
//!
//! Readers never wait for the writer: each write publishes a new snapshot (an `ArcSwap`
//! of `Arc`ed parts, nothing copied but the top level), and a rebuild makes the new main
//! part aside while readers go on with the old one.

use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;

use super::{middle_cap, top_cap, IdMap, SlotSet};
use crate::error::{Error, Result};

/// How far a top level may grow past its cap, in caps, while the previous one is still
/// being folded, before a write waits for that fold.
const TOP_SLACK: usize = 4;

/// Levels of a state above its main part.
pub(super) const LEVELS: usize = 5;

/// What one index keeps of a document and how it finds it: the engine's user.
pub(super) trait Scheme: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// What a document is indexed by: a fingerprint, a signature's band keys.
    type Doc: Copy + Send + Sync + std::fmt::Debug + 'static;
    /// A key of one table: a permuted fingerprint, a band key.
    type Key: Copy + Ord + Send + Sync + std::fmt::Debug + 'static;
    /// The compact part, built in one pass.
    type Main: MainPart;

    /// The highest slot a document may take.
    const MAX_SLOT: usize;
    /// Whether a full top level is folded on a thread of its own (with background
    /// rebuilds), rather than by the write that fills it.
    const FOLD_APART: bool;

    /// Tables per level.
    fn tables(&self) -> usize;
    /// The key of `doc` in table `table`.
    fn key(&self, table: usize, doc: &Self::Doc) -> Self::Key;
    /// A main part of no document.
    fn empty_main(&self) -> Self::Main;
    /// A main part of every live document of `snap`, in slot order.
    fn build(&self, snap: &Snap<Self>) -> Self::Main;
    /// [`Scheme::build`] from a state nothing else reads: a scheme may let go of the old
    /// main part's tables as it builds the new ones, when no other state holds it.
    fn build_owned(&self, snap: Snap<Self>) -> Self::Main {
        self.build(&snap)
    }
    /// Gives a level that was just folded (and will not change) the directories its
    /// lookups read, if any.
    fn index(&self, level: &mut Level<Self>);
}

/// What the engine asks of a main part.
pub(super) trait MainPart: Send + Sync + std::fmt::Debug + 'static {
    /// Documents (slots) in it, removed ones included.
    fn len(&self) -> usize;
    /// The id in slot `slot` (below [`MainPart::len`]).
    fn id(&self, slot: usize) -> u64;
    /// The slot of `id`, if it was merged (it may since have been removed).
    fn position(&self, id: u64) -> Option<u32>;
    fn heap_bytes(&self) -> usize;
}

/// Documents added since the main part was built, and slots removed: per table the
/// `(key, slot)` entries, sorted; the documents and ids of the level's slots (which follow
/// those of the levels below); the slots removed while this level was on top.
#[derive(Debug)]
pub(super) struct Level<S: Scheme> {
    pub(super) tables: Vec<Vec<(S::Key, u32)>>,
    /// Per table of a level that no longer changes, a directory on its keys
    /// ([`Scheme::index`]); empty otherwise.
    pub(super) dirs: Vec<Vec<u32>>,
    pub(super) docs: Vec<S::Doc>,
    pub(super) ids: Vec<u64>,
    pub(super) removed: SlotSet,
}

impl<S: Scheme> Clone for Level<S> {
    fn clone(&self) -> Self {
        Level {
            tables: self.tables.clone(),
            dirs: self.dirs.clone(),
            docs: self.docs.clone(),
            ids: self.ids.clone(),
            removed: self.removed.clone(),
        }
    }
}

impl<S: Scheme> Level<S> {
    pub(super) fn empty(tables: usize) -> Level<S> {
        Level {
            tables: vec![Vec::new(); tables],
            dirs: Vec::new(),
            docs: Vec::new(),
            ids: Vec::new(),
            removed: SlotSet::default(),
        }
    }

    /// Size against the level's cap: its documents and its removals.
    pub(super) fn weight(&self) -> usize {
        self.docs.len() + self.removed.len()
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.capacity() * std::mem::size_of::<(S::Key, u32)>())
            .sum::<usize>()
            + self.dirs.iter().map(|d| d.capacity() * 4).sum::<usize>()
            + self.docs.capacity() * std::mem::size_of::<S::Doc>()
            + self.ids.capacity() * 8
            + self.removed.capacity() * 8
    }
}

/// One consistent state; queries run on it, never on anything mutable.
#[derive(Debug)]
pub(super) struct Snap<S: Scheme> {
    pub(super) scheme: S,
    pub(super) main: Arc<S::Main>,
    pub(super) frozen: Arc<Level<S>>,
    pub(super) mid: Arc<Level<S>>,
    pub(super) low: Arc<Level<S>>,
    /// A full top level being folded into the low one on another thread.
    pub(super) sealed: Arc<Level<S>>,
    pub(super) top: Arc<Level<S>>,
}

/// Where a slot lives: a position of the main part, or a level and an index in it.
pub(super) enum Place<'a, S: Scheme> {
    Main(usize),
    Level(&'a Level<S>, usize),
}

impl<S: Scheme> Snap<S> {
    /// A state of `main` alone.
    pub(super) fn of_main(scheme: S, main: S::Main) -> Snap<S> {
        let empty = || Arc::new(Level::empty(scheme.tables()));
        Snap {
            main: Arc::new(main),
            frozen: empty(),
            mid: empty(),
            low: empty(),
            sealed: empty(),
            top: empty(),
            scheme,
        }
    }

    /// The same main part and levels, but `top` on top.
    fn with_top(&self, top: Arc<Level<S>>) -> Snap<S> {
        Snap {
            scheme: self.scheme.clone(),
            main: Arc::clone(&self.main),
            frozen: Arc::clone(&self.frozen),
            mid: Arc::clone(&self.mid),
            low: Arc::clone(&self.low),
            sealed: Arc::clone(&self.sealed),
            top,
        }
    }

    fn empty_level(&self) -> Arc<Level<S>> {
        Arc::new(Level::empty(self.scheme.tables()))
    }

    pub(super) fn levels(&self) -> [&Level<S>; LEVELS] {
        [&self.frozen, &self.mid, &self.low, &self.sealed, &self.top]
    }

    /// The first slot of the middle level.
    pub(super) fn mid_base(&self) -> usize {
        self.main.len() + self.frozen.docs.len()
    }

    /// The first slot of the low level.
    pub(super) fn low_base(&self) -> usize {
        self.mid_base() + self.mid.docs.len()
    }

    /// The first slot of the top level.
    pub(super) fn top_base(&self) -> usize {
        self.slots() - self.top.docs.len()
    }

    pub(super) fn slots(&self) -> usize {
        self.main.len() + self.levels().iter().map(|l| l.docs.len()).sum::<usize>()
    }

    pub(super) fn len(&self) -> usize {
        self.slots() - self.levels().iter().map(|l| l.removed.len()).sum::<usize>()
    }

    #[inline]
    pub(super) fn removed(&self, slot: u32) -> bool {
        removed_in(self.levels(), slot)
    }

    /// Where `slot` lives.
    #[inline]
    pub(super) fn locate(&self, slot: u32) -> Place<'_, S> {
        locate(self.main.len(), self.levels(), slot)
    }

    #[inline]
    pub(super) fn id(&self, slot: u32) -> u64 {
        match self.locate(slot) {
            Place::Main(p) => self.main.id(p),
            Place::Level(level, i) => level.ids[i],
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.main.heap_bytes() + self.levels().iter().map(|l| l.heap_bytes()).sum::<usize>()
    }
}

/// Where `slot` lives, with `levels` above a main part of `main` slots.
#[inline]
fn locate<'a, S: Scheme>(main: usize, levels: [&'a Level<S>; LEVELS], slot: u32) -> Place<'a, S> {
    let mut s = slot as usize;
    if s < main {
        return Place::Main(s);
    }
    s -= main;
    for level in &levels[..LEVELS - 1] {
        if s < level.docs.len() {
            return Place::Level(level, s);
        }
        s -= level.docs.len();
    }
    Place::Level(levels[LEVELS - 1], s)
}

/// Whether `slot` was removed in any of `levels`.
#[inline]
pub(super) fn removed_in<S: Scheme>(levels: [&Level<S>; LEVELS], slot: u32) -> bool {
    levels
        .iter()
        .any(|l| !l.removed.is_empty() && l.removed.contains(&slot))
}

/// A main part being built on another thread, and the state it is built from.
type Rebuild<S> = (JoinHandle<<S as Scheme>::Main>, Arc<Snap<S>>);

/// The writer of a levelled index: the current state, what readers see of it, and the
/// work going on beside it.
pub(super) struct Engine<S: Scheme> {
    pub(super) snap: Arc<Snap<S>>,
    published: Arc<ArcSwap<Snap<S>>>,
    /// Slots of the live documents of the levels (the rest are found through the main
    /// part).
    recent: IdMap,
    /// A main part being built on another thread, from this state.
    pending: Option<Rebuild<S>>,
    /// The low (or middle) level with the sealed one folded in, being built on another
    /// thread.
    folding: Option<JoinHandle<Folded<S>>>,
    background: bool,
    /// Whether a rebuild may let go of the old main part as it goes, when no reader exists
    /// ([`Engine::set_in_place`]).
    in_place: bool,
    /// The top and middle levels' caps, when set for a test; else by the main part's size.
    caps: Option<(usize, usize)>,
}

impl<S: Scheme> Clone for Engine<S> {
    /// An independent copy: its writes are not seen by this engine's readers. It keeps
    /// the frozen level, which its next rebuild takes in, and a sealed one is folded now.
    fn clone(&self) -> Engine<S> {
        let mut copy = Engine {
            snap: Arc::clone(&self.snap),
            published: Arc::new(ArcSwap::new(Arc::clone(&self.snap))),
            recent: self.recent.clone(),
            pending: None,
            folding: None,
            background: self.background,
            in_place: self.in_place,
            caps: self.caps,
        };
        if copy.snap.sealed.weight() > 0 {
            let snap = Arc::clone(&copy.snap);
            let fold = fold_upper(&snap, &snap.sealed, copy.low_cap(), false);
            copy.install_fold(fold, (*snap.top).clone());
        }
        copy
    }
}

impl<S: Scheme> Engine<S> {
    /// The writer of `snap`. A main part that was being rebuilt (a frozen level) is
    /// rebuilt again, in the background.
    pub(super) fn new(snap: Snap<S>) -> Engine<S> {
        let snap = Arc::new(snap);
        // The rebuild covered the main part and the frozen level only, as when it began.
        // A frozen level of removals alone is rebuilt too: left in place, the next
        // level frozen over it would drop its tombstones and bring those documents back.
        let pending = (snap.frozen.weight() > 0).then(|| rebuild_in_background(&snap));
        Engine {
            published: Arc::new(ArcSwap::new(Arc::clone(&snap))),
            recent: recent_of(&snap),
            snap,
            pending,
            folding: None,
            background: true,
            in_place: false,
            caps: None,
        }
    }

    /// What readers load their state from.
    pub(super) fn published(&self) -> Arc<ArcSwap<Snap<S>>> {
        Arc::clone(&self.published)
    }

    pub(super) fn set_background(&mut self, on: bool) {
        self.background = on;
    }

    /// Rebuilds of the main part run on the writer's thread, and, while no reader of the
    /// index exists, let go of the old main part table by table as the new one is built:
    /// a rebuild then needs one main part and a table or two, not two main parts. For a
    /// writer alone with its index (an offline load).
    pub(super) fn set_in_place(&mut self, on: bool) {
        self.in_place = on;
        if on {
            self.background = false;
        }
    }

    pub(super) fn set_caps(&mut self, top: usize, mid: usize) {
        self.caps = Some((top.max(1), mid.max(1)));
    }

    pub(super) fn top_cap(&self) -> usize {
        self.caps
            .map_or_else(|| top_cap(self.snap.main.len()), |(top, _)| top)
    }

    /// What the low level takes before it is folded into the middle one: the geometric
    /// mean of the top level's cap and the middle one's, at which a write is merged as
    /// many times by folds into the low level as by folds of it into the middle one.
    fn low_cap(&self) -> usize {
        ((self.top_cap() as f64) * (self.mid_cap() as f64)).sqrt() as usize
    }

    /// What the middle level takes before the main part is rebuilt: more in an index
    /// rebuilt in place ([`middle_cap`]).
    fn mid_cap(&self) -> usize {
        self.mid_cap_as(self.in_place)
    }

    /// What the middle level takes in an index rebuilt `in_place` or not, whichever this
    /// one is: the caps set for a test, else by the main part's size.
    fn mid_cap_as(&self, in_place: bool) -> usize {
        self.caps.map_or_else(
            || middle_cap(self.snap.main.len(), in_place),
            |(_, mid)| mid,
        )
    }

    /// Bytes of memory held for the main part, the levels and the id map.
    pub(super) fn heap_bytes(&self) -> usize {
        self.snap.heap_bytes() + self.recent.capacity() * 16
    }

    /// Waits for the fold and the rebuild running in the background, if any, and
    /// installs them.
    pub(super) fn finish_rebuild(&mut self) {
        self.finish_fold();
        if let Some((handle, base)) = self.pending.take() {
            self.install(handle, base);
        }
    }

    /// Rebuilds the main part now, taking the levels in, when they hold at least half of
    /// what starts a service's rebuild (its middle level's cap, whatever this index's
    /// own); returns whether it did. For the end of a load: the state it saves then
    /// leaves a service started on it the most writes before a rebuild of its own, which
    /// holds the old main part beside the new.
    pub(super) fn compact(&mut self) -> bool {
        self.finish_rebuild();
        let snap = Arc::clone(&self.snap);
        let held: usize = snap.levels().iter().map(|l| l.weight()).sum();
        if held == 0 || 2 * held < self.mid_cap_as(false) {
            return false;
        }
        let all = snap.with_top(Arc::clone(&snap.top));
        drop(snap);
        self.rebuild_now(all);
        true
    }

    /// Runs `f` on a copy of the top level, then publishes it; a full top level is sealed
    /// and folded into the middle one. Readers keep the old state until then; an error
    /// publishes nothing.
    pub(super) fn write(
        &mut self,
        f: impl FnOnce(&mut Engine<S>, &mut Level<S>) -> Result<()>,
    ) -> Result<()> {
        self.poll();
        if self.folding.is_some() && self.snap.top.weight() > TOP_SLACK * self.top_cap() {
            // Each write copies the top level: past this, waiting for the fold costs less.
            self.finish_fold();
        }
        let mut top = (*self.snap.top).clone();
        if let Err(e) = f(self, &mut top) {
            // Nothing of a failed call is kept: the writer's map returns to the state's.
            self.recent = recent_of(&self.snap);
            return Err(e);
        }
        if top.weight() > self.top_cap() && self.folding.is_none() {
            self.seal(top);
        } else {
            let snap = self.snap.with_top(Arc::new(top));
            self.publish(snap);
        }
        Ok(())
    }

    /// Stores every `(id, doc)`, in order (a later copy of an id wins): a few inserted
    /// one by one into the top level; for a scheme that folds apart, up to a few top
    /// levels' worth sorted into it; more sorted straight into the middle level (or into a
    /// rebuilt main part, when that is due).
    pub(super) fn insert_bulk(&mut self, docs: &[(u64, S::Doc)]) -> Result<()> {
        self.poll();
        let cap = self.top_cap();
        if docs.len() <= cap / 4 {
            return self.write(|e, top| {
                for (id, doc) in docs {
                    e.remove_in(top, *id);
                    e.add_in(top, *id, doc, true)?;
                }
                Ok(())
            });
        }
        if S::FOLD_APART && docs.len() <= TOP_SLACK * cap {
            // The fold then runs beside the writer, as for single writes.
            return self.write(|e, top| {
                let from = top.docs.len();
                let first = e.snap.top_base() + from;
                for (id, doc) in docs {
                    e.remove_in(top, *id);
                    e.add_in(top, *id, doc, false)?;
                }
                top.dirs.clear();
                let scheme = &e.snap.scheme;
                for (t, entries) in top.tables.iter_mut().enumerate() {
                    let mut new: Vec<(S::Key, u32)> = top.docs[from..]
                        .iter()
                        .enumerate()
                        .map(|(i, doc)| (scheme.key(t, doc), (first + i) as u32))
                        .collect();
                    new.sort_unstable();
                    *entries = merge(entries.iter().copied(), new);
                }
                Ok(())
            });
        }
        // Straight into a fold: the new slots need no top tables, and no state with only
        // some of them is ever published. The middle level is folded here, so the one
        // being folded has to be in it.
        self.finish_fold();
        let mut top = (*self.snap.top).clone();
        for (id, doc) in docs {
            self.remove_in(&mut top, *id);
            if let Err(e) = self.add_in(&mut top, *id, doc, false) {
                self.recent = recent_of(&self.snap);
                return Err(e);
            }
        }
        self.fold_now(top);
        Ok(())
    }

    fn publish(&mut self, snap: Snap<S>) {
        self.snap = Arc::new(snap);
        self.published.store(Arc::clone(&self.snap));
    }

    /// The live slot of `id`, with `top` as the top level so far.
    pub(super) fn slot_of(&self, top: &Level<S>, id: u64) -> Option<u32> {
        match self.recent.get(&id) {
            Some(&slot) => Some(slot),
            None => {
                let s = &self.snap;
                s.main
                    .position(id)
                    .filter(|&p| !removed_in([&s.frozen, &s.mid, &s.low, &s.sealed, top], p))
            }
        }
    }

    /// Where `slot` lives, with `top` as the top level so far.
    pub(super) fn locate<'a>(&'a self, top: &'a Level<S>, slot: u32) -> Place<'a, S> {
        let s = &self.snap;
        locate(
            s.main.len(),
            [&s.frozen, &s.mid, &s.low, &s.sealed, top],
            slot,
        )
    }

    /// Removes `id` in `top`; the slot it had, if it was stored.
    pub(super) fn remove_in(&mut self, top: &mut Level<S>, id: u64) -> Option<u32> {
        let slot = self.slot_of(top, id)?;
        self.recent.remove(&id);
        top.removed.insert(slot);
        Some(slot)
    }

    /// Adds `id` with `doc` in a new slot of `top` (and its tables, with `index`).
    pub(super) fn add_in(
        &mut self,
        top: &mut Level<S>,
        id: u64,
        doc: &S::Doc,
        index: bool,
    ) -> Result<()> {
        let next = self.snap.top_base() + top.docs.len();
        let slot = u32::try_from(next)
            .ok()
            .filter(|&s| s as usize <= S::MAX_SLOT)
            .ok_or(Error::TooManyFingerprints {
                got: next + 1,
                max: S::MAX_SLOT,
            })?;
        top.docs.push(*doc);
        top.ids.push(id);
        if index {
            // The directories would no longer match (the top level has none, unless it
            // was read from a snapshot).
            top.dirs.clear();
            let scheme = &self.snap.scheme;
            for (t, entries) in top.tables.iter_mut().enumerate() {
                let e = (scheme.key(t, doc), slot);
                let at = entries.partition_point(|x| *x < e);
                entries.insert(at, e);
            }
        }
        self.recent.insert(id, slot);
        Ok(())
    }

    /// Seals `top` (full, with its tables filled) and folds it into the low level (or with
    /// it into the middle one, [`fold_upper`]): on a thread of its own where folds run
    /// apart, while the next top fills; else now. No fold may be running.
    fn seal(&mut self, top: Level<S>) {
        if !(S::FOLD_APART && self.background) {
            self.fold_now(top);
            return;
        }
        let snap = Arc::clone(&self.snap);
        let sealed = Snap {
            sealed: Arc::new(top),
            ..snap.with_top(snap.empty_level())
        };
        self.publish(sealed);
        let snap = Arc::clone(&self.snap);
        let low_cap = self.low_cap();
        // On its own thread and not the pool: a rebuild may keep the pool busy for
        // seconds, and the writer would wait on the fold behind it.
        self.folding = Some(std::thread::spawn(move || {
            fold_upper(&snap, &snap.sealed, low_cap, false)
        }));
    }

    /// Folds `top` (the next top level, whose tables need not be filled) into the low
    /// level, or with it into the middle one ([`fold_upper`]), on this thread and
    /// publishes the result under an empty top. No fold may be running.
    fn fold_now(&mut self, top: Level<S>) {
        let snap = Arc::clone(&self.snap);
        let (low, mid) = (snap.low.weight(), snap.mid.weight());
        let into_mid = low + top.weight() > self.low_cap();
        let due = into_mid && mid + low + top.weight() > self.mid_cap() && self.pending.is_none();
        if due && !self.rebuild_apart() {
            // The rebuild reads the documents, not the tables: no need to fold first.
            let all = snap.with_top(Arc::new(top));
            drop(snap);
            self.rebuild_now(all);
            return;
        }
        // A rebuild keeps the thread pool busy with long tasks: fold on this thread then.
        let fold = fold_upper(&snap, &top, self.low_cap(), self.pending.is_none());
        self.install_fold(fold, Level::empty(snap.scheme.tables()));
    }

    /// Whether a rebuild of the main part due now runs on another thread: when asked to,
    /// with something to overlap it with (not a first build), and no frozen level left
    /// over (by a copy) that the next one would replace.
    fn rebuild_apart(&self) -> bool {
        self.background && self.snap.main.len() > 0 && self.snap.frozen.weight() == 0
    }

    /// Rebuilds the main part from every live document of `all` here, and publishes it
    /// alone.
    fn rebuild_now(&mut self, all: Snap<S>) {
        let scheme = all.scheme.clone();
        let alone = self.in_place
            && self.pending.is_none()
            && self.folding.is_none()
            && Arc::strong_count(&self.published) == 1;
        let main = if alone {
            // No reader can load a state meanwhile: this engine's own hold on the old
            // state goes, so that `all` may be the old main part's only holder.
            self.publish(Snap::of_main(scheme.clone(), scheme.empty_main()));
            scheme.build_owned(all)
        } else {
            scheme.build(&all)
        };
        self.publish(Snap::of_main(scheme, main));
        // Every document is in the main part now, each in a new slot.
        self.recent = IdMap::default();
    }

    /// Waits for the fold running in the background, if any, and installs it.
    fn finish_fold(&mut self) {
        if let Some(handle) = self.folding.take() {
            let fold = match handle.join() {
                Ok(fold) => fold,
                Err(_) => fold_upper(&self.snap, &self.snap.sealed, self.low_cap(), false),
            };
            let top = (*self.snap.top).clone();
            self.install_fold(fold, top);
        }
    }

    /// Publishes what `fold` made under `top`: a low level (the old one and the sealed one
    /// folded), or a middle level (the old one, the low one and the sealed one). A middle
    /// level that outgrows its share of the index becomes the frozen level of a rebuild of
    /// the main part on another thread instead, or, when that cannot run apart, the main
    /// part is rebuilt now.
    fn install_fold(&mut self, fold: Folded<S>, top: Level<S>) {
        let snap = Arc::clone(&self.snap);
        let (level, top) = (Arc::new(fold.level), Arc::new(top));
        // The levels replaced are let go of apart; not the state, which holds the main
        // part, still current: a rebuild in place takes that over when it is the only
        // holder.
        if !fold.into_mid {
            self.publish(Snap {
                low: level,
                sealed: snap.empty_level(),
                ..snap.with_top(top)
            });
            let replaced = (Arc::clone(&snap.low), Arc::clone(&snap.sealed));
            drop(snap);
            retire(replaced);
            return;
        }
        let due = level.weight() > self.mid_cap() && self.pending.is_none();
        if !due {
            self.publish(Snap {
                mid: level,
                low: snap.empty_level(),
                sealed: snap.empty_level(),
                ..snap.with_top(top)
            });
            let replaced = [&snap.mid, &snap.low, &snap.sealed].map(Arc::clone);
            drop(snap);
            retire(replaced);
            return;
        }
        if !self.rebuild_apart() {
            let all = Snap {
                mid: level,
                low: snap.empty_level(),
                sealed: snap.empty_level(),
                ..snap.with_top(top)
            };
            drop(snap);
            self.rebuild_now(all);
            return;
        }
        self.publish(Snap {
            frozen: level,
            mid: snap.empty_level(),
            low: snap.empty_level(),
            sealed: snap.empty_level(),
            ..snap.with_top(top)
        });
        drop(snap);
        self.pending = Some(rebuild_in_background(&self.snap));
    }

    /// Installs the background fold and the background rebuild, each if it is done. A
    /// rebuild waits for the fold: it renumbers the levels the fold reads.
    fn poll(&mut self) {
        if self.folding.as_ref().is_some_and(|h| h.is_finished()) {
            self.finish_fold();
        }
        if self.folding.is_none()
            && self
                .pending
                .as_ref()
                .is_some_and(|(handle, _)| handle.is_finished())
        {
            self.finish_rebuild();
        }
    }

    /// Installs the main part built by `handle` from `base` (whose main part and frozen
    /// level are still the current ones): the levels written since are renumbered after
    /// it, and their tombstones of older documents moved to those documents' new slots.
    /// No fold may be running.
    fn install(&mut self, handle: JoinHandle<S::Main>, base: Arc<Snap<S>>) {
        let main = match handle.join() {
            Ok(main) => main,
            // The build cannot fail short of a bug; should it, build again here.
            Err(_) => base.scheme.build(&base),
        };
        let snap = Arc::clone(&self.snap);
        let old = snap.mid_base();
        let new = main.len();
        let shift = |slot: u32| (slot as usize - old + new) as u32;
        let moved = |slot: u32| -> Option<u32> {
            if (slot as usize) < old {
                // Live in `base` (a slot is removed once), so in the new main part.
                main.position(base.id(slot))
            } else {
                Some(shift(slot))
            }
        };
        let renumber = |level: &Level<S>| {
            Arc::new(Level {
                tables: level
                    .tables
                    .iter()
                    .map(|t| t.iter().map(|&(key, slot)| (key, shift(slot))).collect())
                    .collect(),
                // Keys and their order are unchanged.
                dirs: level.dirs.clone(),
                docs: level.docs.clone(),
                ids: level.ids.clone(),
                removed: level.removed.iter().filter_map(|&s| moved(s)).collect(),
            })
        };
        let (mid, low, sealed, top) = (
            renumber(&snap.mid),
            renumber(&snap.low),
            renumber(&snap.sealed),
            renumber(&snap.top),
        );
        self.recent = self
            .recent
            .iter()
            .filter(|&(_, &slot)| slot as usize >= old)
            .map(|(&id, &slot)| (id, shift(slot)))
            .collect();
        self.publish(Snap {
            scheme: snap.scheme.clone(),
            main: Arc::new(main),
            frozen: snap.empty_level(),
            mid,
            low,
            sealed,
            top,
        });
        // The old main part and the old levels, most likely held by these two alone now
        // (nothing current: the levels were renumbered into new ones).
        retire((snap, base));
    }
}

/// A rebuild of `snap`'s main part and frozen level, begun on a thread of its own, and
/// what it was begun from.
fn rebuild_in_background<S: Scheme>(snap: &Snap<S>) -> Rebuild<S> {
    let base = Arc::new(Snap {
        main: Arc::clone(&snap.main),
        frozen: Arc::clone(&snap.frozen),
        ..Snap::of_main(snap.scheme.clone(), snap.scheme.empty_main())
    });
    let job = Arc::clone(&base);
    // Nothing waits for it (readers and the writer go on with the old main part and the
    // levels), so at a lower priority: at 100M documents it takes both cores for a
    // minute, and checks would queue behind it.
    let handle = std::thread::spawn(move || crate::par::in_background(|| job.scheme.build(&job)));
    (handle, base)
}

/// Lets go of `old` on a thread of its own, at a lower priority. The last hold on a
/// replaced main part or middle level frees all of it, a gigabyte at 10M documents (1.1
/// GB took about 0.2 s to free on the test machine) and ten at 100M, and on the writer's
/// thread every write queued behind that (commits of 250–500 ms in the minutes of a
/// rebuild). Without a thread, here, as before.
fn retire<T: Send + 'static>(old: T) {
    // A failed spawn drops the closure, and `old` with it, here.
    let _ = std::thread::Builder::new()
        .name("neardup-retire".into())
        .spawn(move || {
            crate::par::lower_priority();
            drop(old)
        });
}

/// What a fold made: the low level with the level above it taken in, or the middle level
/// with both (the low one then empty).
pub(super) struct Folded<S: Scheme> {
    level: Level<S>,
    into_mid: bool,
}

/// `snap`'s low level with `upper` folded in (the level after it: the sealed one, or the
/// next top one when none is sealed; its tables need not be filled), or, when the two
/// would hold more than `low_cap`, its middle level with both. The tables are merged in
/// parallel when `parallel`.
fn fold_upper<S: Scheme>(
    snap: &Snap<S>,
    upper: &Level<S>,
    low_cap: usize,
    parallel: bool,
) -> Folded<S> {
    let (scheme, low) = (&snap.scheme, &*snap.low);
    if low.weight() + upper.weight() <= low_cap {
        let level = folded(scheme, low, upper, snap.low_base(), parallel);
        return Folded {
            level,
            into_mid: false,
        };
    }
    let level = if low.weight() == 0 {
        folded(scheme, &snap.mid, upper, snap.mid_base(), parallel)
    } else {
        // The low level is small beside the middle one: its tables are made again.
        let both = folded(scheme, low, upper, snap.low_base(), false);
        folded(scheme, &snap.mid, &both, snap.mid_base(), parallel)
    };
    Folded {
        level,
        into_mid: true,
    }
}

/// Level `mid`, whose slots start at `base`, with `top` (the level after it, whose tables
/// need not be filled) folded in: entries of removed documents dropped, tombstones kept.
/// The tables are merged in parallel when `parallel`.
pub(super) fn folded<S: Scheme>(
    scheme: &S,
    mid: &Level<S>,
    top: &Level<S>,
    base: usize,
    parallel: bool,
) -> Level<S> {
    let span = mid.docs.len() + top.docs.len();
    // The removed slots among the two levels' own, as bits: a hash lookup for each of
    // the tables' entries was most of a fold's time.
    let mut gone = vec![0u64; span.div_ceil(64)];
    for &slot in mid.removed.iter().chain(&top.removed) {
        if let Some(i) = (slot as usize).checked_sub(base).filter(|&i| i < span) {
            gone[i / 64] |= 1 << (i % 64);
        }
    }
    let gone = &gone;
    let live = move |slot: u32| {
        let i = slot as usize - base;
        gone[i / 64] & (1 << (i % 64)) == 0
    };
    let top_base = (base + mid.docs.len()) as u32;
    let table = |t: usize| {
        let mut new: Vec<(S::Key, u32)> = top
            .docs
            .iter()
            .enumerate()
            .map(|(i, doc)| (scheme.key(t, doc), top_base + i as u32))
            .filter(|&(_, slot)| live(slot))
            .collect();
        new.sort_unstable();
        merge(
            mid.tables[t]
                .iter()
                .copied()
                .filter(|&(_, slot)| live(slot)),
            new,
        )
    };
    let tables = if parallel {
        crate::par::map((0..scheme.tables()).collect(), table)
    } else {
        (0..scheme.tables()).map(table).collect()
    };
    let mut level = Level {
        tables,
        dirs: Vec::new(),
        docs: Vec::with_capacity(span),
        ids: Vec::with_capacity(span),
        removed: mid.removed.clone(),
    };
    level.docs.extend(&mid.docs);
    level.docs.extend(&top.docs);
    level.ids.extend(&mid.ids);
    level.ids.extend(&top.ids);
    level.removed.extend(&top.removed);
    scheme.index(&mut level);
    level
}

/// Two sorted runs of entries merged.
pub(super) fn merge<K: Copy + Ord>(
    old: impl Iterator<Item = (K, u32)>,
    new: Vec<(K, u32)>,
) -> Vec<(K, u32)> {
    // Sized up front (a filtered iterator would grow the vector by copies), and the new
    // entries, usually far fewer, drive the loop.
    let mut out = Vec::with_capacity(old.size_hint().1.unwrap_or(0) + new.len());
    let mut old = old.peekable();
    for e in new {
        while let Some(o) = old.next_if(|o| *o < e) {
            out.push(o);
        }
        out.push(e);
    }
    out.extend(old);
    out
}

/// Two sorted runs of entries merged, as they are read.
pub(super) struct Merge<K, A: Iterator<Item = (K, u32)>, B: Iterator<Item = (K, u32)>> {
    pub(super) old: std::iter::Peekable<A>,
    pub(super) new: std::iter::Peekable<B>,
}

impl<K, A, B> Iterator for Merge<K, A, B>
where
    K: Copy + Ord,
    A: Iterator<Item = (K, u32)>,
    B: Iterator<Item = (K, u32)>,
{
    type Item = (K, u32);

    #[inline]
    fn next(&mut self) -> Option<(K, u32)> {
        match (self.old.peek(), self.new.peek()) {
            (Some(o), Some(n)) if n < o => self.new.next(),
            (Some(_), _) => self.old.next(),
            (None, _) => self.new.next(),
        }
    }
}

/// The id → slot map of a state's live documents in its levels.
fn recent_of<S: Scheme>(snap: &Snap<S>) -> IdMap {
    (snap.main.len()..snap.slots())
        .map(|s| s as u32)
        .filter(|&s| !snap.removed(s))
        .map(|s| (snap.id(s), s))
        .collect()
}

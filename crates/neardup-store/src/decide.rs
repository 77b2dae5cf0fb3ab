//! The decisions of a document corpus, once for every backend: what a batch of writes
//! does ([`plan`]), which stored documents a check finds ([`Candidates`]) and which share
//! paragraphs with it ([`paragraph_hits`]).
//!
//! A batch is decided in order, each write against the documents stored before the batch
//! (as a [`StoreView`] shows them) and against the batch's own earlier writes: a put
//! `only_if_unique` is refused when a live near-duplicate is stored or put earlier in the
//! batch, so of two near-identical documents in one batch only the first gets in; a put
//! under a stored id replaces that document (which is never its own match); an expired
//! document matches nothing. The answer is a [`Plan`]: what each write gets, and the
//! documents to remove and insert, in order. The backends only carry plans out — the
//! embedded store in one redb transaction, the Redis store in its three phases — so they
//! cannot decide apart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver};
use std::time::Duration;

use neardup::batch::RUN_LEADERS;
use neardup::corpus::{self, BandIndexReader, IdHasher};
use neardup::decide::{Match, Rule, Signature};
use neardup::jaccard::{BandKeys, BANDS};

use crate::clock::{expired, expires_at};
use crate::error::Result;
use crate::prepare::Prepared;

/// One write of a batch.
#[derive(Clone, Debug)]
pub enum Write {
    /// Stores a document under `id` (replacing what `id` held), expiring after `ttl`; with
    /// `only_if_unique`, only if no other stored document is its near-duplicate.
    Put {
        /// Its id.
        id: String,
        /// The document.
        doc: Box<Prepared>,
        /// Time to live.
        ttl: Option<Duration>,
        /// Refuse it when a near-duplicate is stored.
        only_if_unique: bool,
    },
    /// Removes `id`.
    Delete {
        /// Its id.
        id: String,
    },
}

/// A stored document near a query.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Its id.
    pub id: String,
    /// Estimated Jaccard similarity to the query (1 for the same text).
    pub similarity: f32,
    /// 256-bit Hamming distance of the fingerprints.
    pub distance: u32,
}

/// What a check found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// The stored near-duplicates, most similar first.
    pub hits: Vec<Hit>,
    /// Some near-duplicates may be left out: a band key of the text is crowded (a template
    /// or a page stored many times), and a check reads the first documents under such a
    /// key only ([`neardup::corpus::BandIndex::lookup`]). Those listed are near-duplicates
    /// all the same.
    pub partial: bool,
}

/// What one write did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A put: whether the document was stored, whether it replaced one under its id, and
    /// the stored near-duplicates (for an `only_if_unique` put that was refused, the ones
    /// that refused it; otherwise those found when it was stored), most similar first.
    Put {
        /// It is stored now.
        inserted: bool,
        /// It replaced a document stored under its id.
        replaced: bool,
        /// Stored near-duplicates other than itself, the most similar first: at most the
        /// store's [`MAX_MATCHES`] (or its own limit).
        matches: Vec<Hit>,
        /// Near-duplicates beyond those listed.
        more_matches: usize,
        /// Some near-duplicates may be missing from both: a band key of the text is
        /// crowded, as in [`Checked::partial`] (among the stored documents, or among the
        /// batch's earlier puts).
        partial: bool,
    },
    /// A delete: whether the id was stored.
    Delete {
        /// It was stored (and is no more).
        removed: bool,
    },
}

/// Matches an outcome lists by default: a crawler's thousands of identical error pages
/// would otherwise make every put's answer (and the writer's memory) grow with them.
pub const MAX_MATCHES: usize = 100;

/// A paragraph of the query and the stored paragraph it is a near-duplicate of.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanMatch {
    /// The query paragraph's byte span.
    pub query: Range<u32>,
    /// The stored paragraph's byte span in its document.
    pub stored: Range<u32>,
    /// Their estimated Jaccard similarity.
    pub similarity: f32,
}

/// A stored document that shares near-duplicate paragraphs with a query.
#[derive(Clone, Debug, PartialEq)]
pub struct ParagraphHit {
    /// Its id.
    pub id: String,
    /// The share of the query's paragraph bytes in paragraphs it shares.
    pub coverage: f32,
    /// The query paragraphs it shares, each with its most similar stored paragraph.
    pub spans: Vec<SpanMatch>,
}

/// A stored document, as [`DocumentStore::get`](crate::DocumentStore::get) gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredDoc {
    /// Its id.
    pub id: String,
    /// Its signature.
    pub signature: Signature,
    /// When it expires, in Unix seconds, if it does.
    pub expires: Option<u64>,
    /// Paragraphs indexed.
    pub paragraphs: usize,
}

/// A stored document's id and paragraphs.
pub(crate) type StoredParagraphs = (String, Vec<(Range<u32>, Signature)>);

/// The paragraph check's decision, the same over every backend: per stored document,
/// each query paragraph's most similar near-duplicate among its paragraphs, and the share
/// of the query's paragraph bytes those cover; most covered first. `found[i]` names query
/// paragraph `i`'s candidates as (document, paragraph index); `stored` holds every
/// document named, `None` when it is gone or expired.
pub(crate) fn paragraph_hits(
    rule: Rule,
    paras: &[(Range<u32>, Signature)],
    found: &[Vec<(u64, usize)>],
    mut stored: HashMap<u64, Option<StoredParagraphs>>,
) -> Vec<ParagraphHit> {
    let mut by_doc: BTreeMap<u64, Vec<SpanMatch>> = BTreeMap::new();
    for ((span, sig), cands) in paras.iter().zip(found) {
        let mut best: HashMap<u64, SpanMatch> = HashMap::new();
        for &(doc, at) in cands {
            let Some(Some((_, list))) = stored.get(&doc) else {
                continue;
            };
            let Some((other_span, other)) = list.get(at) else {
                continue;
            };
            if let Some(m) = rule.decide(sig, other) {
                if best.get(&doc).is_none_or(|b| m.similarity > b.similarity) {
                    best.insert(
                        doc,
                        SpanMatch {
                            query: span.clone(),
                            stored: other_span.clone(),
                            similarity: m.similarity,
                        },
                    );
                }
            }
        }
        for (doc, m) in best {
            by_doc.entry(doc).or_default().push(m);
        }
    }
    let total: u64 = paras.iter().map(|(s, _)| u64::from(s.end - s.start)).sum();
    let mut out: Vec<ParagraphHit> = by_doc
        .into_iter()
        .filter_map(|(doc, spans)| {
            let (id, _) = stored.remove(&doc).flatten()?;
            let covered: u64 = spans
                .iter()
                .map(|s| u64::from(s.query.end - s.query.start))
                .sum();
            Some(ParagraphHit {
                id,
                coverage: (covered as f64 / total.max(1) as f64) as f32,
                spans,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.coverage
            .total_cmp(&a.coverage)
            .then_with(|| a.id.cmp(&b.id))
    });
    out
}

fn hit(id: String, m: Match) -> Hit {
    Hit {
        id,
        similarity: m.similarity,
        distance: m.distance,
    }
}

/// A stored document as a decision reads it: its id, expiry (Unix seconds, 0 for none)
/// and signature.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DocRecord {
    pub(crate) id: String,
    pub(crate) expires: u64,
    pub(crate) signature: Signature,
}

/// The candidates of one decision, each document once (the first listing wins), with
/// their ids: the answer names documents by id, the rule orders them by internal id
/// among equals.
#[derive(Default)]
pub(crate) struct Candidates {
    list: Vec<(u64, Signature)>,
    names: HashMap<u64, String>,
}

impl Candidates {
    /// Room for `n` candidates.
    pub(crate) fn with_capacity(n: usize) -> Candidates {
        Candidates {
            list: Vec::with_capacity(n),
            names: HashMap::with_capacity(n),
        }
    }

    /// Adds the stored document `internal`, unless it has expired at `now`: an expired
    /// document stops matching at once, before a sweep removes it.
    #[cfg(feature = "redis")]
    pub(crate) fn stored(&mut self, internal: u64, doc: DocRecord, now: u64) {
        if !expired(doc.expires, now) {
            self.add(internal, doc.id, doc.signature);
        }
    }

    /// Adds document `internal` (named `id`), unless it is there already.
    pub(crate) fn add(&mut self, internal: u64, id: String, signature: Signature) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.names.entry(internal) {
            self.list.push((internal, signature));
            slot.insert(id);
        }
    }

    /// The near-duplicates of `query` among them by `rule`, most similar first.
    pub(crate) fn decide(mut self, rule: Rule, query: &Signature) -> Vec<Hit> {
        rule.matches(query, self.list)
            .into_iter()
            .filter_map(|(i, m)| self.names.remove(&i).map(|id| hit(id, m)))
            .collect()
    }
}

/// What a batch's decision needs of the documents stored before it. Every answer is of
/// that state: the batch's own changes are the plan's to follow, not the view's.
pub(crate) trait StoreView {
    /// The internal id of the document stored under `id`, if one is.
    fn id(&self, id: &str) -> Result<Option<u64>>;

    /// The stored documents whose band keys agree with `keys` in some band (a key of 0
    /// agrees with none), each once, as internal ids; of a crowded key, its first.
    fn candidates(&self, keys: &BandKeys) -> Result<corpus::Candidates>;

    /// The stored document `internal`, expired or not; `None` when there is none (a
    /// candidate removed since the index listed it, or never committed).
    fn document(&self, internal: u64) -> Result<Option<DocRecord>>;

    /// A handle on the index [`StoreView::candidates`] reads, answering as it does, for
    /// another thread to look a large batch's candidates up ahead of its decision
    /// ([`plan`]); `None` (the default) when there is no such index in memory.
    fn index_reader(&self) -> Option<BandIndexReader> {
        None
    }
}

/// A batch of writes decided: what each write gets, and the changes that make it so.
#[derive(Debug)]
pub(crate) struct Plan {
    /// What each write did, in order.
    pub(crate) outcomes: Vec<Outcome>,
    /// The changes, in the order the writes make them.
    pub(crate) steps: Vec<Step>,
    /// The internal id after the last one the batch gave (its first, when it gave none).
    pub(crate) next_id: u64,
}

/// One change of a [`Plan`].
#[derive(Debug)]
pub(crate) enum Step {
    /// Remove the document `internal`, stored under `id` (before the batch, or by an
    /// earlier step).
    Remove {
        /// Its id.
        id: String,
        /// Its internal id.
        internal: u64,
    },
    /// Store a document.
    Insert(Insert),
}

/// A document a [`Plan`] stores.
#[derive(Debug)]
pub(crate) struct Insert {
    /// Its id.
    pub(crate) id: String,
    /// Its internal id: the batch's puts are numbered in order, from the first the
    /// backend gave it; a refused put takes no number.
    pub(crate) internal: u64,
    /// When it expires, in Unix seconds; 0 for never.
    pub(crate) expires: u64,
    /// The document.
    pub(crate) doc: Box<Prepared>,
}

/// What a [`Plan`] does to one id ([`Plan::changes`]).
// Only a backend that commits id by id (Redis) needs the net effect.
#[cfg(any(feature = "redis", test))]
#[derive(Debug, PartialEq)]
pub(crate) struct Change<'a> {
    /// The id.
    pub(crate) id: &'a str,
    /// The document it held before the batch.
    pub(crate) before: Option<u64>,
    /// The document it holds after the batch; `None` when the batch deletes it.
    pub(crate) after: Option<&'a Insert>,
}

impl PartialEq for Insert {
    fn eq(&self, other: &Insert) -> bool {
        (&self.id, self.internal, self.expires) == (&other.id, other.internal, other.expires)
            && self.doc == other.doc
    }
}

impl Plan {
    /// The documents the batch leaves stored: its inserts that no later step removes, in
    /// order. (A document put and replaced within one batch never reaches an index.)
    pub(crate) fn survivors(&self) -> impl Iterator<Item = &Insert> {
        let removed: HashSet<u64> = self
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Remove { internal, .. } => Some(*internal),
                Step::Insert(_) => None,
            })
            .collect();
        self.steps.iter().filter_map(move |s| match s {
            Step::Insert(i) if !removed.contains(&i.internal) => Some(i),
            _ => None,
        })
    }

    /// The batch's net effect, per id whose document it changes, in the order the batch
    /// first changes them: what the id held before and holds after. An id put and then
    /// deleted within the batch held nothing before and holds nothing after: it is left
    /// out.
    #[cfg(any(feature = "redis", test))]
    pub(crate) fn changes(&self) -> Vec<Change<'_>> {
        let mut out: Vec<Change<'_>> = Vec::new();
        let mut at: HashMap<&str, usize> = HashMap::new();
        for step in &self.steps {
            let (id, first, after) = match step {
                Step::Remove { id, internal } => (id.as_str(), Some(*internal), None),
                Step::Insert(i) => (i.id.as_str(), None, Some(i)),
            };
            match at.get(id) {
                Some(&k) => out[k].after = after,
                None => {
                    at.insert(id, out.len());
                    // The first step on an id removes what was stored before the batch,
                    // or inserts where nothing was.
                    out.push(Change {
                        id,
                        before: first,
                        after,
                    });
                }
            }
        }
        out.retain(|c| c.before.is_some() || c.after.is_some());
        out
    }
}

/// Puts a batch needs before its stored candidates are looked up on a thread of their
/// own, ahead of the decision ([`StoreView::index_reader`]): a bulk load's 50,000 puts
/// spent a quarter of the writer's time waiting on the index's cache misses, one put
/// after the other, while the rest of the decision (ids, the batch's own puts) could
/// run beside them. A request of a few puts is not worth a thread.
const AHEAD_MIN: usize = 2048;

/// Puts whose candidates the thread looking ahead hands over at once.
const AHEAD_CHUNK: usize = 256;

/// Decides `writes` in order at `now` by `rule`, against the documents `view` shows and
/// the batch's earlier writes; the batch's puts are numbered from `first`.
/// Each put's outcome lists at most `max_matches` matches, counting the rest.
pub(crate) fn plan<V: StoreView + ?Sized>(
    view: &V,
    rule: Rule,
    now: u64,
    first: u64,
    max_matches: usize,
    writes: Vec<Write>,
) -> Result<Plan> {
    let puts = writes
        .iter()
        .filter(|w| matches!(w, Write::Put { .. }))
        .count();
    let reader = match puts >= AHEAD_MIN {
        true => view.index_reader(),
        false => None,
    };
    let Some(reader) = reader else {
        return plan_with(view, rule, now, first, max_matches, writes, puts, None);
    };
    // The candidates of the stored documents are of the state before the batch, and
    // which of the batch's puts share a band key with which is of their keys alone:
    // neither depends on the batch's decisions, so both can be found ahead of them.
    let texts: Vec<(BandKeys, u64)> = writes
        .iter()
        .filter_map(|w| match w {
            Write::Put { doc, .. } => Some((doc.signature.index_keys(), identity(&doc.signature))),
            Write::Delete { .. } => None,
        })
        .collect();
    let listings = Listings::new(texts.len());
    std::thread::scope(|scope| {
        let (to_planner, found) = sync_channel::<Vec<Looked>>(16);
        let texts = &texts;
        let ahead = std::thread::Builder::new()
            .name("neardup-ahead".into())
            .spawn_scoped(scope, move || {
                look_ahead(&reader, texts, listings, &to_planner)
            });
        let ahead_of = match &ahead {
            Ok(_) => Some(Ahead {
                found,
                chunk: Vec::new().into_iter(),
            }),
            // No thread: the planner looks them up itself.
            Err(_) => None,
        };
        let planned = plan_with(view, rule, now, first, max_matches, writes, puts, ahead_of);
        // A thread that panicked handed over nothing more, and the planner looked the
        // rest up itself: its panic is not the batch's failure. Its listings are kept for
        // the next batch.
        if let Ok(handle) = ahead {
            if let Ok(listings) = handle.join() {
                drop(listings);
            }
        }
        planned
    })
}

/// What the thread looking ahead found for a put.
struct Looked {
    /// Its candidates among the stored documents.
    stored: corpus::Candidates,
    /// A band key of it was crowded among the batch's earlier puts: `earlier` lists the
    /// first of them under it only.
    crowded: bool,
    /// Its text's [`identity`].
    ident: u64,
    /// The first put of the batch with its text, by its place among the batch's puts.
    first: u32,
    /// The first puts of texts earlier in the batch that share a band key with it (its
    /// own text's too, when it is a copy), by their places, in no order.
    earlier: Vec<u32>,
}

/// Finds the candidates of the puts with `texts` (band keys and identity) in order, and
/// hands them over in chunks until the planner stops taking them; gives `listings` back.
fn look_ahead(
    reader: &BandIndexReader,
    texts: &[(BandKeys, u64)],
    mut listings: Listings,
    to_planner: &std::sync::mpsc::SyncSender<Vec<Looked>>,
) -> Listings {
    let mut first_of: HashMap<u64, u32, BuildHasherDefault<IdHasher>> = HashMap::default();
    for (c, chunk) in texts.chunks(AHEAD_CHUNK).enumerate() {
        // A chunk's lookups at once: their cache misses overlap.
        let keys: Vec<BandKeys> = chunk.iter().map(|&(keys, _)| keys).collect();
        let stored = reader.lookup_many(&keys);
        let looked = chunk
            .iter()
            .zip(stored)
            .enumerate()
            .map(|(i, (&(keys, ident), stored))| {
                let at = (c * AHEAD_CHUNK + i) as u32;
                let mut earlier = Vec::new();
                let crowded = listings.find(&keys, &mut earlier);
                // A copy of an earlier text is found through that one's listings.
                let first = *first_of.entry(ident).or_insert(at);
                if first == at {
                    listings.list(at, &keys);
                }
                Looked {
                    stored,
                    crowded,
                    ident,
                    first,
                    earlier,
                }
            })
            .collect();
        if to_planner.send(looked).is_err() {
            break;
        }
    }
    listings
}

/// What the thread looking ahead found for a batch's puts, in order ([`plan`]).
struct Ahead {
    found: Receiver<Vec<Looked>>,
    chunk: std::vec::IntoIter<Looked>,
}

impl Ahead {
    /// What was found for the next put; `None` once the thread stopped short.
    fn next(&mut self) -> Option<Looked> {
        loop {
            if let Some(c) = self.chunk.next() {
                return Some(c);
            }
            self.chunk = self.found.recv().ok()?.into_iter();
        }
    }
}

/// [`plan`], with the stored candidates of the `puts` puts found `ahead` of the decision
/// or (`None`) as each put comes.
#[allow(clippy::too_many_arguments)]
fn plan_with<V: StoreView + ?Sized>(
    view: &V,
    rule: Rule,
    now: u64,
    first: u64,
    max_matches: usize,
    writes: Vec<Write>,
    puts: usize,
    ahead: Option<Ahead>,
) -> Result<Plan> {
    let mut planner = Planner {
        view,
        rule,
        now,
        next_id: first,
        max_matches,
        holders: HashMap::default(),
        removed: HashSet::default(),
        pending: PendingPuts::new(first, puts, ahead.is_none()),
        steps: Vec::with_capacity(writes.len()),
        records: HashMap::default(),
        verdicts: HashMap::default(),
        ahead,
    };
    let mut outcomes = Vec::with_capacity(writes.len());
    for write in writes {
        outcomes.push(match write {
            Write::Delete { id } => planner.delete(id)?,
            Write::Put {
                id,
                doc,
                ttl,
                only_if_unique,
            } => planner.put(id, doc, ttl, only_if_unique)?,
        });
    }
    Ok(Plan {
        outcomes,
        steps: planner.steps,
        next_id: planner.next_id,
    })
}

/// The hasher of the maps a batch decision keeps by id (which its callers choose) and
/// by text identities: seeded at random once a process, as the standard library's, and
/// a fraction of its cost (SipHash on every put's id was 4% of a bulk load's writer).
type Fast = foldhash::fast::RandomState;

/// A batch being decided.
struct Planner<'v, V: ?Sized> {
    view: &'v V,
    rule: Rule,
    now: u64,
    next_id: u64,
    max_matches: usize,
    /// The ids the batch has changed so far, and the document each holds now.
    holders: HashMap<String, Option<u64>, Fast>,
    /// The documents stored before the batch that it has removed: no longer candidates.
    removed: HashSet<u64, BuildHasherDefault<IdHasher>>,
    /// The batch's puts so far, as candidates of its later ones.
    pending: PendingPuts,
    steps: Vec<Step>,
    /// The stored candidates read so far, with their texts' identities: the puts of a
    /// batch (a bulk of one page's copies) share their candidates, read once.
    records: HashMap<u64, Option<(DocRecord, u64)>, BuildHasherDefault<IdHasher>>,
    /// Decisions by the identities of the two texts: identical texts are verified once,
    /// whatever their number.
    verdicts: HashMap<(u64, u64), Option<Match>, Fast>,
    /// The puts' stored candidates, looked up ahead on another thread, if they are.
    ahead: Option<Ahead>,
}

/// A text's identity for the decision: its hash, sketch and fingerprint together, so
/// that equal identities are the same text as [`Signature::same_text`] tells it (a 64-bit
/// text hash alone could be made to collide).
fn identity(s: &Signature) -> u64 {
    // On the stack: a put's identity is taken once a put, and a heap allocation each was
    // a cost of its own in bulk loads.
    const TEXT: usize = 8;
    const SKETCH: usize = TEXT + neardup::jaccard::BYTES;
    let mut bytes = [0u8; SKETCH + 8 * neardup::fingerprint::LANES];
    bytes[..TEXT].copy_from_slice(&s.text_hash.to_le_bytes());
    bytes[TEXT..SKETCH].copy_from_slice(&s.sketch.to_bytes());
    for (lane, out) in s
        .fingerprint
        .iter()
        .zip(bytes[SKETCH..].chunks_exact_mut(8))
    {
        out.copy_from_slice(&lane.to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

impl<V: StoreView + ?Sized> Planner<'_, V> {
    /// The document `id` holds now: as the batch left it, or as stored.
    fn holder(&self, id: &str) -> Result<Option<u64>> {
        match self.holders.get(id) {
            Some(&held) => Ok(held),
            None => self.view.id(id),
        }
    }

    /// Removes `held`, the document `id` holds, if it holds one; whether it did.
    fn remove(&mut self, id: &str, held: Option<u64>) -> bool {
        let Some(internal) = held else {
            return false;
        };
        self.removed.insert(internal);
        self.pending.remove(internal);
        self.steps.push(Step::Remove {
            id: id.to_string(),
            internal,
        });
        true
    }

    /// Whether `held` is a document a read finds: put earlier in this batch, or stored
    /// and not expired (an expired one stays until a sweep takes it, but a read, a
    /// check and an answer treat it as gone).
    fn live(&self, held: Option<u64>) -> Result<bool> {
        let Some(internal) = held else {
            return Ok(false);
        };
        // A put of this batch (its internal id among the batch's, not merely above the
        // first: a batch of deletes alone numbers nothing, and Redis gives it a first of 0).
        let batch = internal.checked_sub(self.pending.first);
        if batch.is_some_and(|i| i < self.pending.puts.len() as u64) {
            return Ok(true);
        }
        let doc = self.view.document(internal)?;
        Ok(doc.is_some_and(|d| !expired(d.expires, self.now)))
    }

    fn delete(&mut self, id: String) -> Result<Outcome> {
        let held = self.holder(&id)?;
        let live = self.live(held)?;
        if self.remove(&id, held) {
            self.holders.insert(id, None);
        }
        Ok(Outcome::Delete { removed: live })
    }

    fn put(
        &mut self,
        id: String,
        doc: Box<Prepared>,
        ttl: Option<Duration>,
        only_if_unique: bool,
    ) -> Result<Outcome> {
        let signature = doc.signature;
        let keys = signature.index_keys();
        let own = self.holder(&id)?;
        let looked = self.look(&signature, &keys)?;
        let (ident, group) = (looked.ident, looked.first);
        let (matches, more_matches, partial) = self.near(&signature, looked, own)?;
        if only_if_unique && (!matches.is_empty() || more_matches > 0) {
            return Ok(Outcome::Put {
                inserted: false,
                replaced: false,
                matches,
                more_matches,
                partial,
            });
        }
        let replaced = self.live(own)?;
        self.remove(&id, own);
        let internal = self.next_id;
        self.next_id += 1;
        self.pending.push(
            Pending {
                internal,
                signature,
                ident,
                keys,
                name: id.clone(),
            },
            group,
        );
        self.holders.insert(id.clone(), Some(internal));
        self.steps.push(Step::Insert(Insert {
            id,
            internal,
            expires: expires_at(self.now, ttl),
            doc,
        }));
        Ok(Outcome::Put {
            inserted: true,
            replaced,
            matches,
            more_matches,
            partial,
        })
    }

    /// What a put with `signature` and band `keys` finds, as [`look_ahead`] finds it: from
    /// the thread looking ahead while it has them, else here (the batch's own puts then
    /// through their listings; `first` is then unused).
    fn look(&mut self, signature: &Signature, keys: &BandKeys) -> Result<Looked> {
        if let Some(ahead) = self.ahead.as_mut() {
            match ahead.next() {
                Some(looked) => return Ok(looked),
                None => {
                    // The thread stopped short: the rest is found here, the puts so far
                    // listed as they would have been.
                    self.ahead = None;
                    self.pending.relist();
                }
            }
        }
        Ok(Looked {
            stored: self.view.candidates(keys)?,
            crowded: false,
            ident: identity(signature),
            first: 0,
            earlier: Vec::new(),
        })
    }

    /// The near-duplicates of a put with `signature` that found `looked`, stored now,
    /// but `own`, the document its id holds, which it would replace: live stored
    /// documents the batch has not removed, and the batch's earlier puts, each found by
    /// its band keys alike; the most similar [`Planner::max_matches`] of them, and how
    /// many more. The batch's own puts match whatever their expiry: only a zero ttl makes
    /// one expired at once, and both backends have always let it match the rest of its
    /// batch.
    ///
    /// Work grows with the candidates, not with their square: each stored candidate is
    /// read once a batch, and each pair of distinct texts decided once.
    fn near(
        &mut self,
        signature: &Signature,
        looked: Looked,
        own: Option<u64>,
    ) -> Result<(Vec<Hit>, usize, bool)> {
        let ident = looked.ident;
        let keys = signature.index_keys();
        let mut scored: Vec<(u64, Match)> = Vec::new();
        let mut partial = looked.stored.crowded || looked.crowded;
        for internal in looked.stored.ids {
            if Some(internal) == own || self.removed.contains(&internal) {
                continue;
            }
            if !self.records.contains_key(&internal) {
                let record = self.view.document(internal)?.map(|d| {
                    let id = identity(&d.signature);
                    (d, id)
                });
                self.records.insert(internal, record);
            }
            let Some(Some((doc, other))) = self.records.get(&internal) else {
                continue;
            };
            if expired(doc.expires, self.now) {
                continue;
            }
            let verdict = *self
                .verdicts
                .entry((ident, *other))
                .or_insert_with(|| self.rule.decide(signature, &doc.signature));
            if let Some(m) = verdict {
                scored.push((internal, m));
            }
        }
        let (earlier, crowded) = self.pending.sharing(&keys, &looked.earlier);
        partial |= crowded;
        for p in earlier {
            if Some(p.internal) == own {
                continue;
            }
            let verdict = *self
                .verdicts
                .entry((ident, p.ident))
                .or_insert_with(|| self.rule.decide(signature, &p.signature));
            if let Some(m) = verdict {
                scored.push((p.internal, m));
            }
        }
        let more = scored.len().saturating_sub(self.max_matches);
        let best = |(i, a): &(u64, Match), (j, b): &(u64, Match)| {
            b.similarity
                .total_cmp(&a.similarity)
                .then(a.distance.cmp(&b.distance))
                .then(i.cmp(j))
        };
        if more > 0 && self.max_matches > 0 {
            scored.select_nth_unstable_by(self.max_matches - 1, best);
        }
        scored.truncate(self.max_matches);
        scored.sort_by(best);
        let hits = scored
            .into_iter()
            .filter_map(|(internal, m)| {
                let name = match self.records.get(&internal) {
                    Some(Some((doc, _))) => doc.id.clone(),
                    _ => self.pending.name(internal)?.to_string(),
                };
                Some(hit(name, m))
            })
            .collect();
        Ok((hits, more, partial))
    }
}

/// A document of the current batch: its internal id and signature, for the
/// `only_if_unique` checks of the batch's later puts.
struct Pending {
    internal: u64,
    signature: Signature,
    /// The text's [`identity`]: copies of a text listed earlier in the batch share its
    /// listings instead of making their own.
    ident: u64,
    keys: BandKeys,
    name: String,
}

/// The puts of one write transaction so far, found by their band keys as the index finds
/// stored documents ([`BandIndex::candidates`]: a nonzero key agreeing in some band):
/// through their [`Listings`], or (a batch looked up ahead) by the texts sharing a key
/// that [`look_ahead`] found. Comparing each put of a bulk request with every put before
/// it cost a tenth of a core at a thousand documents a request.
///
/// [`BandIndex::candidates`]: neardup::corpus::BandIndex::candidates
struct PendingPuts {
    /// The internal id of the transaction's first put: they are numbered from it, in order.
    first: u64,
    /// By internal id less `first`; `None` once deleted or replaced.
    puts: Vec<Option<Pending>>,
    /// The listings of the puts' band keys; `None` while they are looked up ahead.
    listings: Option<Listings>,
    /// A text → the first put of that text (its place in `puts`), whose listings stand
    /// for all its copies: a bulk of a page's thousand copies walks one listing a band,
    /// not a thousand. The text is its identity, or while looked up ahead the place of
    /// its first put among the batch's puts (refused ones too).
    first_of: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    /// The first put of a text → every put of that text, itself included, in order.
    copies: HashMap<u32, Vec<u32>, BuildHasherDefault<IdHasher>>,
}

/// Band-key listings of a batch's puts. They are chained in one vector rather than kept
/// in a vector per key: a map of vectors, and the puts in a B-tree, were a tenth of the
/// server's CPU in bulk inserts (twenty allocations a put, and moving 300-byte puts about
/// in the B-tree's nodes).
struct Listings {
    /// `band << 32 | key` → its latest listing in `chain`, and how many it has: no more
    /// than [`RUN_LEADERS`], the first puts under the key, as a crowded key of the band
    /// index gives its first (a batch of 20,000 copies of a template listed each under
    /// every one before it: 4·10⁹ listings, and the load ran out of memory).
    heads: Heads,
    /// Per listing: the put and the listing before it under the same band key
    /// ([`NO_LISTING`] for none).
    chain: Chain,
}

/// The end of a chain of [`Listings`].
const NO_LISTING: u32 = u32::MAX;

/// Listings of this many band keys and more are kept for the thread's next batch.
const SPARE_MIN: usize = AHEAD_MIN * BANDS;

type Heads = HashMap<u64, (u32, u32), BuildHasherDefault<IdHasher>>;
type Chain = Vec<(u32, u32)>;

thread_local! {
    /// The listings of the last large batch decided on this thread, emptied, for its next
    /// one: a bulk load's writer decides batch after batch of the same size, and their
    /// listings (30 MB for 50,000 puts) were fresh memory each time, its page faults a
    /// tenth of the writer's time.
    static SPARE: std::cell::Cell<Option<(Heads, Chain)>> = const { std::cell::Cell::new(None) };
}

impl Listings {
    /// Room for the listings of `puts` puts: the thread's spare, if it fits.
    fn new(puts: usize) -> Listings {
        let keys = puts * BANDS;
        match SPARE.take() {
            // Not much larger than needed either: clearing a spare costs with its size.
            Some((heads, chain)) if heads.capacity() >= keys && heads.capacity() <= 4 * keys => {
                Listings { heads, chain }
            }
            spare => {
                SPARE.set(spare);
                Listings {
                    heads: HashMap::with_capacity_and_hasher(keys, Default::default()),
                    chain: Vec::with_capacity(keys),
                }
            }
        }
    }

    /// Lists put `at` under its nonzero `keys` that have fewer than [`RUN_LEADERS`]; a key
    /// that has them is marked crowded (its count one more).
    fn list(&mut self, at: u32, keys: &BandKeys) {
        for (band, &key) in keys.iter().enumerate() {
            if key != 0 {
                let listing = self.chain.len() as u32;
                let head = self
                    .heads
                    .entry((band as u64) << 32 | u64::from(key))
                    .or_insert((NO_LISTING, 0));
                if head.1 as usize >= RUN_LEADERS {
                    head.1 = RUN_LEADERS as u32 + 1;
                    continue;
                }
                self.chain.push((at, head.0));
                *head = (listing, head.1 + 1);
            }
        }
    }

    /// Adds to `out` the puts listed under a nonzero key of `keys` (a put once a band
    /// it shares); whether a key of them was crowded (more puts than were listed).
    fn find(&self, keys: &BandKeys, out: &mut Vec<u32>) -> bool {
        let mut crowded = false;
        for (band, &key) in keys.iter().enumerate() {
            if key == 0 {
                continue;
            }
            let (mut listing, listed) = self
                .heads
                .get(&((band as u64) << 32 | u64::from(key)))
                .map_or((NO_LISTING, 0), |&h| h);
            crowded |= listed as usize > RUN_LEADERS;
            while let Some(&(put, before)) = self.chain.get(listing as usize) {
                out.push(put);
                listing = before;
            }
        }
        crowded
    }
}

impl Drop for Listings {
    fn drop(&mut self) {
        if self.heads.capacity() >= SPARE_MIN {
            let mut heads = std::mem::take(&mut self.heads);
            let mut chain = std::mem::take(&mut self.chain);
            heads.clear();
            chain.clear();
            // Not once the thread's own are dropped, as it ends.
            let _ = SPARE.try_with(|cell| cell.set(Some((heads, chain))));
        }
    }
}

impl PendingPuts {
    /// No puts yet; the first will be numbered `first`, and at most `puts` will come (a
    /// sweep's batch of deletes sizes nothing); `listed`: found through listings of their
    /// own, else as looked up ahead.
    fn new(first: u64, puts: usize, listed: bool) -> PendingPuts {
        PendingPuts {
            first,
            puts: Vec::with_capacity(puts),
            listings: listed.then(|| Listings::new(puts)),
            first_of: HashMap::default(),
            copies: HashMap::default(),
        }
    }

    /// Adds the next put: its internal id is the next after the puts so far. `group` is
    /// the place of its text's first put among the batch's, when looked up ahead.
    fn push(&mut self, p: Pending, group: u32) {
        debug_assert_eq!(p.internal, self.first + self.puts.len() as u64);
        let at = self.puts.len() as u32;
        let text = match self.listings {
            Some(_) => p.ident,
            None => u64::from(group),
        };
        if let Some(&first) = self.first_of.get(&text) {
            // A copy of a text put before in this batch: found through that one's
            // listings (the same band keys), not listed again.
            self.copies
                .entry(first)
                .or_insert_with(|| vec![first])
                .push(at);
            self.puts.push(Some(p));
            return;
        }
        self.first_of.insert(text, at);
        if let Some(listings) = self.listings.as_mut() {
            listings.list(at, &p.keys);
        }
        self.puts.push(Some(p));
    }

    /// Lists every put so far that still stands, as if it had been listed when it came:
    /// the thread looking ahead stopped short, and the rest of the batch is found here.
    fn relist(&mut self) {
        if self.listings.is_some() {
            return;
        }
        let puts = std::mem::take(&mut self.puts);
        self.listings = Some(Listings::new(puts.capacity()));
        self.first_of.clear();
        self.copies.clear();
        for p in puts {
            match p {
                Some(p) => self.push(p, 0),
                None => self.puts.push(None),
            }
        }
    }

    /// Forgets the put `internal` (no-op for a document stored before the transaction).
    fn remove(&mut self, internal: u64) {
        if let Some(slot) = internal
            .checked_sub(self.first)
            .and_then(|i| self.puts.get_mut(i as usize))
        {
            *slot = None;
        }
    }

    /// The puts sharing a band with `keys`: through the listings, or (looked up ahead)
    /// the puts of the texts whose first puts are `earlier`; and whether a key was
    /// crowded in the listings (looked up ahead, [`Looked::crowded`] says).
    fn sharing(&self, keys: &BandKeys, earlier: &[u32]) -> (Vec<&Pending>, bool) {
        let mut at: Vec<u32> = Vec::new();
        let crowded = match &self.listings {
            Some(listings) => listings.find(keys, &mut at),
            None => {
                at.extend(
                    earlier
                        .iter()
                        .filter_map(|&g| self.first_of.get(&u64::from(g)).copied()),
                );
                false
            }
        };
        at.sort_unstable();
        at.dedup();
        let mut all: Vec<u32> = Vec::with_capacity(at.len());
        for i in at {
            match self.copies.get(&i) {
                Some(copies) => all.extend_from_slice(copies),
                None => all.push(i),
            }
        }
        let puts = all
            .iter()
            .filter_map(|&i| self.puts.get(i as usize)?.as_ref())
            .collect();
        (puts, crowded)
    }

    /// The id of the put `internal`, if it is one of the batch's and still stands.
    fn name(&self, internal: u64) -> Option<&str> {
        let i = internal.checked_sub(self.first)?;
        self.puts
            .get(usize::try_from(i).ok()?)?
            .as_ref()
            .map(|p| p.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prepare::{DocConfig, Preparer};
    use proptest::prelude::*;

    /// A key more than [`RUN_LEADERS`] puts share lists its first ones only; a key of
    /// fewer, all of them.
    #[test]
    fn a_crowded_key_lists_its_first_puts() {
        let mut listings = Listings::new(200);
        let mut crowded = [0u32; BANDS];
        crowded[3] = 9;
        for at in 0..200 {
            listings.list(at, &crowded);
        }
        let mut few = [0u32; BANDS];
        few[5] = 4;
        for at in [200, 201, 202] {
            listings.list(at, &few);
        }
        let found = |keys: &BandKeys| {
            let mut out = Vec::new();
            listings.find(keys, &mut out);
            out.sort_unstable();
            out
        };
        assert_eq!(found(&crowded), (0..RUN_LEADERS as u32).collect::<Vec<_>>());
        assert_eq!(found(&few), [200, 201, 202]);
        let mut both = crowded;
        both[5] = 4;
        assert_eq!(found(&both).len(), RUN_LEADERS + 3);
    }

    const WORDS: [&str; 24] = [
        "river", "stone", "mill", "farmer", "quiet", "hill", "sun", "slowly", "behind", "old",
        "watches", "bank", "fox", "lazy", "dog", "brown", "quick", "near", "while", "sets",
        "field", "barn", "rain", "wind",
    ];

    /// A text of 60 words from one of three bases, with the words at `edits` replaced:
    /// texts of one base and an edit or two are near-duplicates, of different bases never.
    fn text(base: usize, edits: &[usize]) -> String {
        let mut words: Vec<String> = (0..60)
            .map(|i| {
                let w = WORDS[(i * 7 + base * 5) % WORDS.len()];
                format!("{w}{}", (i * 31 + base * 17) % 97)
            })
            .collect();
        for &at in edits {
            words[at % 60] = WORDS[at % WORDS.len()].to_string();
        }
        words.join(" ")
    }

    fn doc(base: usize, edits: &[usize]) -> Box<Prepared> {
        Box::new(Preparer::new(DocConfig::default()).prepare(&text(base, edits), false))
    }

    fn put(id: &str, doc: Box<Prepared>, only_if_unique: bool) -> Write {
        Write::Put {
            id: id.into(),
            doc,
            ttl: None,
            only_if_unique,
        }
    }

    fn delete(id: &str) -> Write {
        Write::Delete { id: id.into() }
    }

    /// Documents by internal id, found by brute force: the view a backend gives.
    #[derive(Default)]
    struct Memory {
        docs: BTreeMap<u64, DocRecord>,
        next_id: u64,
    }

    impl StoreView for Memory {
        fn id(&self, id: &str) -> Result<Option<u64>> {
            Ok(self.docs.iter().find(|(_, d)| d.id == id).map(|(&n, _)| n))
        }

        fn candidates(&self, keys: &BandKeys) -> Result<corpus::Candidates> {
            let agree = |d: &DocRecord| {
                let theirs = d.signature.index_keys();
                keys.iter().zip(&theirs).any(|(&a, &b)| a != 0 && a == b)
            };
            // Every document: the brute force has no crowded key.
            let ids = self
                .docs
                .iter()
                .filter(|(_, d)| agree(d))
                .map(|(&n, _)| n)
                .collect();
            Ok(corpus::Candidates {
                ids,
                crowded: false,
            })
        }

        fn document(&self, internal: u64) -> Result<Option<DocRecord>> {
            Ok(self.docs.get(&internal).cloned())
        }
    }

    impl Memory {
        /// Decides `writes` at `now` and carries the plan out, as a backend does.
        fn apply(&mut self, writes: Vec<Write>, now: u64) -> Plan {
            let rule = DocConfig::default().rule();
            let plan = match plan(&*self, rule, now, self.next_id, MAX_MATCHES, writes) {
                Ok(plan) => plan,
                Err(e) => panic!("an in-memory view does not fail: {e}"),
            };
            for step in &plan.steps {
                match step {
                    Step::Remove { internal, .. } => {
                        self.docs.remove(internal);
                    }
                    Step::Insert(i) => {
                        let record = DocRecord {
                            id: i.id.clone(),
                            expires: i.expires,
                            signature: i.doc.signature,
                        };
                        self.docs.insert(i.internal, record);
                    }
                }
            }
            self.next_id = plan.next_id;
            plan
        }
    }

    /// Whether a put was stored, and the ids of its matches.
    fn put_outcome(o: &Outcome) -> (bool, Vec<&str>) {
        match o {
            Outcome::Put {
                inserted, matches, ..
            } => (*inserted, matches.iter().map(|h| h.id.as_str()).collect()),
            Outcome::Delete { .. } => panic!("a delete where a put was expected"),
        }
    }

    #[test]
    fn a_unique_put_is_refused_by_a_stored_near_duplicate_and_a_plain_one_is_not() {
        let mut m = Memory::default();
        m.apply(vec![put("a", doc(0, &[]), false)], 0);
        let plan = m.apply(
            vec![
                put("b", doc(0, &[3]), true),
                put("c", doc(0, &[3]), false),
                put("d", doc(1, &[]), true),
            ],
            0,
        );
        assert_eq!(put_outcome(&plan.outcomes[0]), (false, vec!["a"]));
        assert_eq!(put_outcome(&plan.outcomes[1]), (true, vec!["a"]));
        assert_eq!(put_outcome(&plan.outcomes[2]), (true, vec![]));
        // The refused put took no number.
        let ids: Vec<(&str, u64)> = plan.survivors().map(|i| (&*i.id, i.internal)).collect();
        assert_eq!(ids, [("c", 1), ("d", 2)]);
        assert_eq!(plan.next_id, 3);
    }

    /// A view that counts the records read.
    struct Counting<'a> {
        inner: &'a Memory,
        reads: std::cell::Cell<usize>,
    }

    impl StoreView for Counting<'_> {
        fn id(&self, id: &str) -> Result<Option<u64>> {
            self.inner.id(id)
        }

        fn candidates(&self, keys: &BandKeys) -> Result<corpus::Candidates> {
            self.inner.candidates(keys)
        }

        fn document(&self, internal: u64) -> Result<Option<DocRecord>> {
            self.reads.set(self.reads.get() + 1);
            self.inner.document(internal)
        }
    }

    #[test]
    fn copies_of_one_text_cost_one_read_each_and_answers_list_a_bounded_number() {
        // A crawler's error page, stored 300 times, then put 300 more times in one batch:
        // each stored copy is read once for the whole batch, every put's answer lists the
        // most similar `max` and counts the rest, and an only-if-unique copy is refused.
        let mut m = Memory::default();
        let page = |i: usize| put(&format!("stored{i}"), doc(5, &[]), false);
        m.apply((0..300).map(page).collect(), 0);
        let view = Counting {
            inner: &m,
            reads: std::cell::Cell::new(0),
        };
        let max = 7;
        let mut writes: Vec<Write> = (0..300)
            .map(|i| put(&format!("new{i}"), doc(5, &[]), false))
            .collect();
        writes.push(put("gate", doc(5, &[]), true));
        writes.push(put("other", doc(6, &[]), true));
        let rule = DocConfig::default().rule();
        let plan = match plan(&view, rule, 0, m.next_id, max, writes) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(view.reads.get(), 300, "each stored copy read once");
        for (i, o) in plan.outcomes.iter().take(300).enumerate() {
            let Outcome::Put {
                inserted,
                matches,
                more_matches,
                ..
            } = o
            else {
                panic!("{o:?}")
            };
            assert!(inserted);
            // Every stored copy and every earlier put of the batch: all exact copies.
            assert_eq!(
                (matches.len(), *more_matches),
                (max, 300 + i - max),
                "put {i}"
            );
            assert!(matches.iter().all(|h| h.similarity == 1.0));
            // The lowest internal ids first among equals.
            assert_eq!(matches[0].id, "stored0");
        }
        let Outcome::Put {
            inserted,
            matches,
            more_matches,
            ..
        } = &plan.outcomes[300]
        else {
            panic!()
        };
        assert!(!inserted);
        assert_eq!(matches.len() + more_matches, 600);
        assert_eq!(put_outcome(&plan.outcomes[301]), (true, vec![]));
    }

    /// The brute-force view with the candidates of an index, as the embedded store's: a
    /// batch of `AHEAD_MIN` puts or more has them looked up ahead on another thread.
    struct Indexed<'a> {
        inner: &'a Memory,
        index: neardup::corpus::BandIndex,
        /// Lookups on the planner's thread.
        asked: std::cell::Cell<usize>,
    }

    impl StoreView for Indexed<'_> {
        fn id(&self, id: &str) -> Result<Option<u64>> {
            self.inner.id(id)
        }

        fn candidates(&self, keys: &BandKeys) -> Result<corpus::Candidates> {
            self.asked.set(self.asked.get() + 1);
            Ok(self.index.lookup(keys))
        }

        fn document(&self, internal: u64) -> Result<Option<DocRecord>> {
            self.inner.document(internal)
        }

        fn index_reader(&self) -> Option<BandIndexReader> {
            Some(self.index.reader())
        }
    }

    #[test]
    fn a_batch_whose_candidates_are_found_ahead_decides_as_brute_force() {
        // Stored documents of a few texts, then a batch large enough to be looked up
        // ahead: puts of those texts and others, edited or not, unique or not, under
        // new ids and stored ones, and deletes. Decided with the index read on another
        // thread, with the stored documents scanned instead, and one write at a time.
        let mut m = Memory::default();
        let stored: Vec<Write> = (0..200)
            .map(|i| put(&format!("d{}", i * 7), doc(i % 9, &[i % 60]), false))
            .collect();
        m.apply(stored, 0);
        let n = AHEAD_MIN + 300;
        let writes = || -> Vec<Write> {
            (0..n)
                .map(|i| {
                    // Ids come back 1,500 writes on; a delete takes the id of the
                    // write three before it.
                    let id = format!("d{}", (i * 13) % 1500);
                    if i % 97 == 5 {
                        return delete(&format!("d{}", ((i - 3) * 13) % 1500));
                    }
                    let edits = [i % 60, (i * 7) % 60];
                    put(&id, doc(i % 23, &edits[..i % 3]), i % 4 == 0)
                })
                .collect()
        };
        let puts = writes()
            .iter()
            .filter(|w| matches!(w, Write::Put { .. }))
            .count();
        assert!(puts >= AHEAD_MIN, "the batch is looked up ahead");
        let keys: Vec<(u64, BandKeys)> = m
            .docs
            .iter()
            .map(|(&n, d)| (n, d.signature.index_keys()))
            .collect();
        let index = match neardup::corpus::BandIndex::from_docs(keys) {
            Ok(index) => index,
            Err(e) => panic!("{e}"),
        };
        let rule = DocConfig::default().rule();
        let ahead = Indexed {
            inner: &m,
            index,
            asked: std::cell::Cell::new(0),
        };
        let decided =
            |view: &dyn StoreView| match plan(view, rule, 0, m.next_id, MAX_MATCHES, writes()) {
                Ok(p) => p,
                Err(e) => panic!("{e}"),
            };
        let fast = decided(&ahead);
        assert_eq!(
            ahead.asked.get(),
            0,
            "every put's candidates were found ahead"
        );
        let brute = decided(&m);
        assert_eq!(fast.outcomes, brute.outcomes);
        assert_eq!(fast.steps.len(), brute.steps.len());
        let ids = |p: &Plan| -> Vec<(String, u64)> {
            p.survivors().map(|i| (i.id.clone(), i.internal)).collect()
        };
        assert_eq!(ids(&fast), ids(&brute));
        let mut alone = Memory {
            docs: m.docs.clone(),
            next_id: m.next_id,
        };
        let one_by_one: Vec<Outcome> = writes()
            .into_iter()
            .flat_map(|w| alone.apply(vec![w], 0).outcomes)
            .collect();
        assert_eq!(fast.outcomes, one_by_one);
        // A thread that stops short: the planner finds the rest itself, the same.
        let texts: Vec<(BandKeys, u64)> = writes()
            .iter()
            .filter_map(|w| match w {
                Write::Put { doc, .. } => {
                    Some((doc.signature.index_keys(), identity(&doc.signature)))
                }
                Write::Delete { .. } => None,
            })
            .collect();
        let (to, all) = sync_channel(texts.len());
        drop(look_ahead(
            &ahead.index.reader(),
            &texts,
            Listings::new(texts.len()),
            &to,
        ));
        drop(to);
        let (to, found) = sync_channel(texts.len());
        for chunk in all.iter().take(3) {
            let _ = to.send(chunk);
        }
        drop(to);
        let short = Ahead {
            found,
            chunk: Vec::new().into_iter(),
        };
        let rule = DocConfig::default().rule();
        let first = m.next_id;
        let cut = match plan_with(&m, rule, 0, first, MAX_MATCHES, writes(), puts, Some(short)) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cut.outcomes, brute.outcomes);
        assert_eq!(ids(&cut), ids(&brute));
        // Refused, replaced and matched puts all came: the batch tested something.
        let count = |f: &dyn Fn(&Outcome) -> bool| fast.outcomes.iter().filter(|o| f(o)).count();
        assert!(
            count(&|o| matches!(
                o,
                Outcome::Put {
                    inserted: false,
                    ..
                }
            )) > 100
        );
        assert!(count(&|o| matches!(o, Outcome::Put { replaced: true, .. })) > 100);
        assert!(count(&|o| matches!(o, Outcome::Delete { removed: true })) > 5);
    }

    #[test]
    fn a_limit_of_no_matches_still_refuses_a_unique_put() {
        let mut m = Memory::default();
        m.apply(vec![put("a", doc(0, &[]), false)], 0);
        let rule = DocConfig::default().rule();
        let plan = match plan(
            &m,
            rule,
            0,
            m.next_id,
            0,
            vec![put("b", doc(0, &[3]), true)],
        ) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            plan.outcomes,
            [Outcome::Put {
                inserted: false,
                replaced: false,
                matches: vec![],
                more_matches: 1,
                partial: false,
            }]
        );
    }

    #[test]
    fn of_two_near_identical_unique_puts_in_one_batch_only_the_first_gets_in() {
        let mut m = Memory::default();
        let plan = m.apply(
            vec![put("x", doc(2, &[]), true), put("y", doc(2, &[9]), true)],
            0,
        );
        assert_eq!(put_outcome(&plan.outcomes[0]), (true, vec![]));
        assert_eq!(put_outcome(&plan.outcomes[1]), (false, vec!["x"]));
    }

    #[test]
    fn an_expired_document_matches_nothing() {
        let mut m = Memory::default();
        m.apply(
            vec![Write::Put {
                id: "old".into(),
                doc: doc(0, &[]),
                ttl: Some(Duration::from_secs(10)),
                only_if_unique: false,
            }],
            90,
        );
        assert_eq!(m.docs[&0].expires, 100);
        let at = |now| {
            let rule = DocConfig::default().rule();
            let writes = vec![put("new", doc(0, &[]), true)];
            match plan(&m, rule, now, m.next_id, MAX_MATCHES, writes) {
                Ok(plan) => put_outcome(&plan.outcomes[0]).0,
                Err(e) => panic!("{e}"),
            }
        };
        assert!(!at(99), "live until its expiry");
        assert!(at(100), "expired at its expiry");
        // Deleting or replacing it answers as a read would (found until its expiry,
        // gone from then), and takes its row either way.
        let write_at = |write: Write, now| {
            let rule = DocConfig::default().rule();
            match plan(&m, rule, now, m.next_id, MAX_MATCHES, vec![write]) {
                Ok(plan) => (plan.outcomes[0].clone(), plan.steps.len()),
                Err(e) => panic!("{e}"),
            }
        };
        for (now, live) in [(99, true), (100, false)] {
            let (outcome, steps) = write_at(delete("old"), now);
            assert_eq!(outcome, Outcome::Delete { removed: live }, "at {now}");
            assert_eq!(steps, 1, "the row goes at {now}");
            let (outcome, steps) = write_at(put("old", doc(1, &[]), false), now);
            let Outcome::Put { replaced, .. } = outcome else {
                panic!("{outcome:?}")
            };
            assert_eq!(replaced, live, "at {now}");
            assert_eq!(steps, 2, "the old row goes, the new one comes, at {now}");
        }
        // A batch of deletes alone numbers no put: Redis gives it a first of 0, which the
        // expired document's internal id is not below.
        let rule = DocConfig::default().rule();
        let alone = plan(&m, rule, 100, 0, MAX_MATCHES, vec![delete("old")]);
        assert_eq!(
            alone.unwrap().outcomes,
            [Outcome::Delete { removed: false }]
        );
    }

    #[test]
    fn a_put_replaces_what_its_id_holds_and_is_not_its_own_match() {
        let mut m = Memory::default();
        m.apply(vec![put("a", doc(0, &[]), false)], 0);
        let plan = m.apply(vec![put("a", doc(0, &[1]), true)], 0);
        assert_eq!(
            plan.outcomes,
            [Outcome::Put {
                inserted: true,
                replaced: true,
                matches: vec![],
                more_matches: 0,
                partial: false,
            }]
        );
        assert!(matches!(
            &plan.steps[..],
            [
                Step::Remove { internal: 0, .. },
                Step::Insert(Insert { internal: 1, .. })
            ]
        ));
        let changes = plan.changes();
        assert_eq!(changes.len(), 1);
        assert_eq!((changes[0].id, changes[0].before), ("a", Some(0)));
        assert_eq!(changes[0].after.map(|i| i.internal), Some(1));
    }

    #[test]
    fn deleted_and_replaced_documents_stop_matching_within_the_batch() {
        let mut m = Memory::default();
        m.apply(vec![put("a", doc(0, &[]), false)], 0);
        let plan = m.apply(
            vec![
                delete("a"),
                put("b", doc(0, &[]), true),
                put("c", doc(0, &[]), true),
                delete("b"),
                delete("zz"),
                put("d", doc(0, &[]), true),
                put("d", doc(0, &[5]), false),
            ],
            0,
        );
        assert_eq!(plan.outcomes[0], Outcome::Delete { removed: true });
        assert_eq!(put_outcome(&plan.outcomes[1]), (true, vec![]));
        assert_eq!(put_outcome(&plan.outcomes[2]), (false, vec!["b"]));
        assert_eq!(plan.outcomes[3], Outcome::Delete { removed: true });
        assert_eq!(plan.outcomes[4], Outcome::Delete { removed: false });
        assert_eq!(put_outcome(&plan.outcomes[5]), (true, vec![]));
        // Its id's earlier put is replaced, not matched.
        assert!(matches!(
            &plan.outcomes[6],
            Outcome::Put { inserted: true, replaced: true, matches, more_matches: 0, partial: false } if matches.is_empty()
        ));
        let survivors: Vec<(&str, u64)> = plan.survivors().map(|i| (&*i.id, i.internal)).collect();
        assert_eq!(survivors, [("d", 3)]);
        // "b" came and went: no net change.
        let changes: Vec<(&str, Option<u64>, Option<u64>)> = plan
            .changes()
            .iter()
            .map(|c| (c.id, c.before, c.after.map(|i| i.internal)))
            .collect();
        assert_eq!(changes, [("a", Some(0), None), ("d", None, Some(3))]);
        assert_eq!(m.docs.keys().copied().collect::<Vec<_>>(), [3]);
    }

    /// A batch's write: an id (few, so that batches touch their own puts), and for a put
    /// its base text, edits and only_if_unique (`None`: a delete).
    type TestWrite = (u8, Option<(usize, Vec<usize>, bool)>);

    fn to_write((id, put_of): &TestWrite) -> Write {
        let id = format!("d{id}");
        match put_of {
            Some((base, edits, unique)) => put(&id, doc(*base, edits), *unique),
            None => delete(&id),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A batch decides each write as if the writes before it were stored: the same
        /// outcomes, the same documents, as one write per batch.
        #[test]
        fn a_batch_decides_as_its_writes_one_at_a_time(
            batches in prop::collection::vec(
                prop::collection::vec(
                    (0u8..6, prop::option::weighted(
                        0.8,
                        (0usize..3, prop::collection::vec(0usize..60, 0..6), any::<bool>()),
                    )),
                    1..10,
                ),
                1..5,
            )
        ) {
            let mut together = Memory::default();
            let mut alone = Memory::default();
            for batch in &batches {
                let plan = together.apply(batch.iter().map(to_write).collect(), 0);
                let outcomes: Vec<Outcome> = batch
                    .iter()
                    .flat_map(|w| alone.apply(vec![to_write(w)], 0).outcomes)
                    .collect();
                prop_assert_eq!(plan.outcomes, outcomes);
                prop_assert_eq!(&together.docs, &alone.docs);
            }
        }
    }
}

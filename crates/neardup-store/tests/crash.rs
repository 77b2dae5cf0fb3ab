//! Crash tests: a writer process is killed with SIGKILL at random moments, many times, on
//! the same store, and after each kill the store must open with every acknowledged write in
//! it, every acknowledged remove gone, and nothing else but the one call in flight, whole or
//! not at all (a bulk call is one transaction). Kills land inside `FingerprintStore::create` and inside
//! `FingerprintStore::open` (redb's recovery after the previous kill) too.
//!
//! The writer is this test binary run again ([`writer`], ignored in normal runs). It logs
//! each call before making it (`B seq now op…`) and once it has returned (`A seq`), with
//! fsync, so the log says which calls were acknowledged. A clock it sets before each call
//! (logged as `now`) makes expiries and sweeps exact.
//!
//! `NEARDUP_CRASH_TRIALS` sets the number of kills of the writer (default 150) and
//! `NEARDUP_CRASH_SEED` the seed; the test stops early at a time limit
//! (`NEARDUP_CRASH_SECONDS`, default 100) but only after a minimum number of trials.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use neardup::tables::Blocks;
use neardup_store::{Clock, FingerprintStore, Record, StoreConfig, StoreError};

const CONFIG: StoreConfig = StoreConfig {
    blocks: Blocks::Fixed(5),
    distance: 3,
    fingerprint_version: 1,
};

/// Ids drawn from a small set, so that inserts replace and removes find their document.
const IDS: u64 = 300;

/// splitmix64: a reproducible stream of random numbers from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn id(&mut self) -> String {
        format!("d{}", self.below(IDS))
    }

    /// A fingerprint: one of a few bases with a bit or two flipped, so queries match.
    fn fingerprint(&mut self) -> u64 {
        let base = (self.below(16) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        base ^ (1 << self.below(64)) ^ (1 << self.below(64))
    }

    fn ttl(&mut self) -> Option<u64> {
        (self.below(3) == 0).then(|| self.below(120))
    }
}

/// A call the writer makes.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Create,
    Open,
    Insert(Vec<(String, u64, Option<u64>)>),
    Remove(Vec<String>),
    Sweep,
}

impl Op {
    fn random(rng: &mut Rng) -> Op {
        match rng.below(20) {
            0..=7 => Op::Insert(vec![(rng.id(), rng.fingerprint(), rng.ttl())]),
            8..=11 => {
                let n = 2 + rng.below(40);
                Op::Insert(
                    (0..n)
                        .map(|_| (rng.id(), rng.fingerprint(), rng.ttl()))
                        .collect(),
                )
            }
            12..=14 => Op::Remove(vec![rng.id()]),
            15..=17 => Op::Remove((0..2 + rng.below(20)).map(|_| rng.id()).collect()),
            _ => Op::Sweep,
        }
    }

    fn to_line(&self) -> String {
        let ttl = |t: &Option<u64>| t.map_or("-".to_string(), |t| t.to_string());
        match self {
            Op::Create => "create".into(),
            Op::Open => "open".into(),
            Op::Sweep => "sweep".into(),
            Op::Insert(docs) => {
                let docs: Vec<String> = docs
                    .iter()
                    .map(|(id, fp, t)| format!("{id}:{fp}:{}", ttl(t)))
                    .collect();
                format!("insert {}", docs.join(" "))
            }
            Op::Remove(ids) => format!("remove {}", ids.join(" ")),
        }
    }

    fn parse(words: &[&str]) -> Op {
        match words {
            ["create"] => Op::Create,
            ["open"] => Op::Open,
            ["sweep"] => Op::Sweep,
            ["insert", docs @ ..] => Op::Insert(
                docs.iter()
                    .map(|d| {
                        let f: Vec<&str> = d.split(':').collect();
                        let ttl = (f[2] != "-").then(|| f[2].parse().unwrap());
                        (f[0].to_string(), f[1].parse().unwrap(), ttl)
                    })
                    .collect(),
            ),
            ["remove", ids @ ..] => Op::Remove(ids.iter().map(|s| s.to_string()).collect()),
            _ => panic!("not an op: {words:?}"),
        }
    }
}

/// What the store holds: id → (fingerprint, expiry).
type Model = BTreeMap<String, (u64, Option<u64>)>;

/// `op` made at `now` on `model`, as the store makes it.
fn apply(model: &mut Model, op: &Op, now: u64) {
    match op {
        Op::Create | Op::Open => {}
        Op::Insert(docs) => {
            for (id, fp, ttl) in docs {
                let expires = ttl.map(|t| (now + t).max(1));
                model.insert(id.clone(), (*fp, expires));
            }
        }
        Op::Remove(ids) => {
            for id in ids {
                model.remove(id);
            }
        }
        Op::Sweep => model.retain(|_, (_, expires)| expires.is_none_or(|at| at > now)),
    }
}

/// A clock the writer sets before each call.
struct SetClock(AtomicU64);

impl Clock for SetClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The log, each line on disk before the writer goes on.
struct Log(std::fs::File);

impl Log {
    fn line(&mut self, text: &str) {
        self.0.write_all(format!("{text}\n").as_bytes()).unwrap();
        self.0.sync_data().unwrap();
    }
}

/// The writer: `NEARDUP_CRASH_WRITER="DIR LOG SEED SEQ NOW CREATE"` makes calls on the
/// store in DIR until it is killed (or 20 s pass), logging them to LOG; it first creates the
/// store (CREATE = 1) or opens it.
#[test]
#[ignore = "the writer process of crash_tests, run by it"]
fn writer() {
    let spec = std::env::var("NEARDUP_CRASH_WRITER").expect("run by crash_tests");
    let words: Vec<&str> = spec.split(' ').collect();
    let [dir, log, seed, seq, now, create] = words[..] else {
        panic!("bad spec {spec}");
    };
    let (mut seq, mut now): (u64, u64) = (seq.parse().unwrap(), now.parse().unwrap());
    let mut rng = Rng(seed.parse().unwrap());
    let mut log = Log(std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap());
    let clock = Arc::new(SetClock(AtomicU64::new(now)));
    let first = if create == "1" { Op::Create } else { Op::Open };
    log.line(&format!("B {seq} {now} {}", first.to_line()));
    let store = match first {
        Op::Create => FingerprintStore::create(dir, CONFIG, 1000),
        _ => FingerprintStore::open(dir, Some(CONFIG)),
    };
    let mut store = store.unwrap().with_clock(clock.clone());
    log.line(&format!("A {seq}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        seq += 1;
        now += 1 + rng.below(20);
        clock.0.store(now, Ordering::SeqCst);
        let op = Op::random(&mut rng);
        log.line(&format!("B {seq} {now} {}", op.to_line()));
        match &op {
            Op::Insert(docs) => {
                let docs: Vec<(&str, u64, Option<Duration>)> = docs
                    .iter()
                    .map(|(id, fp, t)| (id.as_str(), *fp, t.map(Duration::from_secs)))
                    .collect();
                store.insert_bulk(&docs, |_| {}).unwrap();
            }
            Op::Remove(ids) if ids.len() == 1 => {
                store.remove(&ids[0]).unwrap();
            }
            Op::Remove(ids) => {
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                store.remove_bulk(&ids).unwrap();
            }
            Op::Sweep => {
                store.sweep().unwrap();
            }
            Op::Create | Op::Open => unreachable!(),
        }
        log.line(&format!("A {seq}"));
    }
}

/// One trial's log: the calls acknowledged, and the one in flight (begun, not
/// acknowledged) with its `now`, if any.
struct Trial {
    acknowledged: Vec<(u64, Op)>,
    in_flight: Option<(u64, Op)>,
    last_seq: u64,
    last_now: u64,
}

/// Reads the lines of one trial from `text` (what the log gained in it). A last line
/// without its newline was cut by the kill: it does not count.
fn read_trial(text: &str, seq: u64, now: u64) -> Trial {
    let mut trial = Trial {
        acknowledged: Vec::new(),
        in_flight: None,
        last_seq: seq,
        last_now: now,
    };
    let complete = text.rsplit_once('\n').map_or("", |(lines, _)| lines);
    for line in complete.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["B", seq, now, ref op @ ..] => {
                assert!(trial.in_flight.is_none(), "two calls in flight: {line}");
                let (seq, now) = (seq.parse().unwrap(), now.parse().unwrap());
                trial.last_seq = seq;
                trial.last_now = now;
                trial.in_flight = Some((now, Op::parse(op)));
            }
            ["A", seq] => {
                let seq: u64 = seq.parse().unwrap();
                assert_eq!(seq, trial.last_seq, "acknowledged out of order");
                let done = trial.in_flight.take().expect("acknowledged before begun");
                trial.acknowledged.push(done);
            }
            _ => panic!("bad log line {line:?}"),
        }
    }
    trial
}

fn records_model(records: Vec<Record>) -> Model {
    records
        .into_iter()
        .map(|r| (r.id, (r.fingerprint, r.expires)))
        .collect()
}

/// Starts the writer on `dir`.
fn spawn(dir: &Path, log: &Path, seed: u64, seq: u64, now: u64, create: bool) -> Child {
    let spec = format!(
        "{} {} {seed} {seq} {now} {}",
        dir.display(),
        log.display(),
        u8::from(create)
    );
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "writer",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("NEARDUP_CRASH_WRITER", spec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the log has grown past `from` and holds `needle`, then `delay` more, and
/// kills the writer (SIGKILL). A writer that died on its own fails the test.
fn kill_after(child: &mut Child, log: &Path, from: usize, needle: &str, delay: Duration) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.len() > from && text[from..].contains(needle) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the writer stopped ({status}) before {needle:?}: {err}");
        }
        assert!(
            Instant::now() < deadline,
            "the writer never logged {needle:?}"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    if status.code().is_some() {
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        panic!("the writer exited ({status}) instead of being killed: {err}");
    }
}

#[test]
fn crash_tests() {
    let trials: usize = std::env::var("NEARDUP_CRASH_TRIALS")
        .ok()
        .map_or(150, |n| n.parse().unwrap());
    let seed: u64 = std::env::var("NEARDUP_CRASH_SEED")
        .ok()
        .map_or(0x5eed, |n| n.parse().unwrap());
    let started = Instant::now();
    let limit = Duration::from_secs(
        std::env::var("NEARDUP_CRASH_SECONDS")
            .ok()
            .map_or(100, |n| n.parse().unwrap()),
    );
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log");

    // Kills during create, each in a fresh directory: afterwards the directory holds a
    // whole empty store or none, and create (or open) works.
    let mut killed_in_create = 0;
    for k in 0..20 {
        let dir = tmp.path().join(format!("create-{k}"));
        let from = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
        let mut child = spawn(&dir, &log, rng.next(), 0, 1_000_000, true);
        // Mostly within the first milliseconds (a create on a fast disk takes a few), some
        // later, when the writer may have gone on to its first calls.
        let delay = Duration::from_micros(rng.below(if k % 4 == 0 { 60_000 } else { 3_000 }));
        kill_after(&mut child, &log, from, "create", delay);
        let text = std::fs::read_to_string(&log).unwrap();
        let trial = read_trial(&text[from..], 0, 1_000_000);
        let created = trial
            .acknowledged
            .first()
            .is_some_and(|op| op.1 == Op::Create);
        killed_in_create += usize::from(!created);
        let store = match FingerprintStore::open(&dir, Some(CONFIG)) {
            Ok(store) => store,
            Err(StoreError::NotAStore(_)) if !created => {
                FingerprintStore::create(&dir, CONFIG, 1000).unwrap_or_else(|e| {
                    panic!("create after a kill inside create: {e}");
                })
            }
            Err(e) => panic!("after a kill in create (acknowledged: {created}): {e}"),
        };
        // Whatever the writer acknowledged after create is in it.
        let mut model = Model::new();
        for (now, op) in trial.acknowledged {
            apply(&mut model, &op, now);
        }
        let got = records_model(store.records().unwrap());
        if got != model {
            let mut with = model.clone();
            if let Some((now, op)) = &trial.in_flight {
                apply(&mut with, op, *now);
            }
            assert_eq!(got, with, "after a kill in create trial {k}");
        }
        drop(store);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".partial"))
            .collect();
        assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    }

    // The long run: one store, killed again and again.
    let dir = tmp.path().join("store");
    let mut model = Model::new();
    let (mut seq, mut now) = (0u64, 1_000_000u64);
    let (mut writes, mut killed_in_open, mut in_flight_applied, mut in_flight_lost) =
        (0usize, 0usize, 0usize, 0usize);
    let mut done = 0;
    while done < trials && (started.elapsed() < limit || done < 40) {
        let create = done == 0;
        let from = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
        let mut child = spawn(&dir, &log, rng.next(), seq + 1, now + 1000, create);
        // A third of the kills aim at open (redb's recovery from the last kill), the others
        // fall anywhere in the first 200 ms of calls.
        let (needle, delay) = match rng.below(3) {
            0 if !create => ("open", Duration::from_micros(rng.below(3_000))),
            _ => ("\nA ", Duration::from_micros(rng.below(200_000))),
        };
        kill_after(&mut child, &log, from, needle, delay);
        done += 1;

        let text = std::fs::read_to_string(&log).unwrap();
        let trial = read_trial(&text[from..], seq + 1, now + 1000);
        seq = trial.last_seq + 1;
        now = trial.last_now + 1000;
        let opened = trial
            .acknowledged
            .first()
            .is_some_and(|(_, op)| matches!(op, Op::Open | Op::Create));
        killed_in_open += usize::from(!opened);
        for (at, op) in &trial.acknowledged {
            apply(&mut model, op, *at);
            if let Op::Insert(docs) = op {
                writes += docs.len();
            }
        }
        let clock = Arc::new(SetClock(AtomicU64::new(now)));
        let store = FingerprintStore::open(&dir, Some(CONFIG))
            .unwrap_or_else(|e| panic!("trial {done}: the store does not open: {e}"))
            .with_clock(clock);
        let got = records_model(store.records().unwrap());
        if got != model {
            let mut with = model.clone();
            let (at, op) = trial.in_flight.as_ref().unwrap_or_else(|| {
                panic!("trial {done}: the store differs, and no call was in flight")
            });
            apply(&mut with, op, *at);
            assert!(
                got == with,
                "trial {done}: the store holds neither the acknowledged calls nor them and \
                 the one in flight ({}); {} documents, expected {} or {}",
                op.to_line(),
                got.len(),
                model.len(),
                with.len()
            );
            model = with;
            in_flight_applied += 1;
        } else if trial.in_flight.is_some() {
            in_flight_lost += 1;
        }
        // The tables rebuilt on open find what is stored and live.
        for (id, (fp, expires)) in model.iter().take(25) {
            let found = store.find_all(*fp).unwrap();
            let live = expires.is_none_or(|at| at > now);
            assert_eq!(
                found.contains(&(id.clone(), 0)),
                live,
                "trial {done}: {id} found {found:?}"
            );
        }
        drop(store);
    }
    eprintln!(
        "crash tests: {done} kills of the writer on one store, {writes} acknowledged document \
         writes, {killed_in_open} kills inside open, {killed_in_create} of 20 inside create, \
         the call in flight kept {in_flight_applied} times and lost {in_flight_lost}; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(done >= 40.min(trials));
    assert!(writes > 0, "nothing was acknowledged");
    assert!(killed_in_create > 0, "no kill landed inside create");
    assert!(
        trials < 30 || killed_in_open > 0,
        "no kill landed inside open"
    );
    // The store as the model says, once more, after the last kill.
    let store = FingerprintStore::open(&dir, Some(CONFIG)).unwrap();
    assert!(records_model(store.records().unwrap()) == model);
}

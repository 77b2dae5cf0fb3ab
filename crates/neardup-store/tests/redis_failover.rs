//! An acknowledged write survives the failover of its primary: batches are written with
//! `WAIT 1` while a primary is killed (`kill -9`); the cluster (made by `redis-cli
//! --cluster create`) promotes its replica, the killed node is started again and rejoins
//! as the new primary's replica, the writes go on, and every document of every
//! acknowledged batch is found afterwards (by id and by a check of its text). Bounded:
//! about 10 s, at most 120 s of writing (the rejoined replica's full copy of its primary
//! is slow on a busy machine).
//!
//! A test binary of its own: it takes the cluster down for a moment, so it must not run
//! beside the other Redis tests (cargo runs test binaries one after another). Needs
//! `NEARDUP_REDIS` as `tests/redis.rs` does, and the cluster of `scripts/redis-cluster.sh`
//! (its nodes are restarted through it).

use std::process::Command;
use std::time::{Duration, Instant};

use neardup_store::{DocConfig, Preparer, RedisOptions, RedisStore, Write};

/// A connection to the node at `addr` whose connect, reads and writes each give up after
/// `timeout`: a node that stopped answering must not hold the killer thread past the
/// test's bound.
fn connect(addr: &str, timeout: Duration) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://{addr}")).ok()?;
    let con = client.get_connection_with_timeout(timeout).ok()?;
    con.set_read_timeout(Some(timeout)).ok()?;
    con.set_write_timeout(Some(timeout)).ok()?;
    Some(con)
}

/// A connection to one node.
fn node(addr: &str) -> redis::Connection {
    connect(addr, Duration::from_secs(2)).unwrap_or_else(|| panic!("no connection to {addr}"))
}

/// The address of the first primary that answers among the seeds, and the nodes' list.
fn cluster_nodes(seeds: &str) -> String {
    for seed in seeds.split(',') {
        let addr = seed.trim().trim_start_matches("redis://");
        let Some(mut con) = connect(addr, Duration::from_secs(1)) else {
            continue;
        };
        if let Ok(nodes) = redis::cmd("CLUSTER").arg("NODES").query::<String>(&mut con) {
            return nodes;
        }
    }
    panic!("no seed node answers: {seeds}");
}

/// Addresses of the primaries that are up.
fn primaries(nodes: &str) -> Vec<String> {
    let mut out: Vec<String> = nodes
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            (f.len() > 8 && f[2].contains("master") && !f[2].contains("fail"))
                .then(|| f[1].split('@').next().unwrap_or_default().to_string())
        })
        .collect();
    out.sort();
    out
}

/// Whether every node that answers says the cluster is ok.
fn cluster_ok(seeds: &str) -> bool {
    seeds
        .split(',')
        .map(|s| s.trim().trim_start_matches("redis://"))
        .filter_map(|addr| {
            let mut con = connect(addr, Duration::from_millis(300))?;
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(&mut con)
                .ok()
        })
        .all(|info| info.contains("cluster_state:ok"))
}

/// A text of 40 words no other document shares.
fn text(n: u64) -> String {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..40)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("w{}", x % 100_000)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seeds, or `None` when no cluster is configured: then the test says so and passes,
/// unless `NEARDUP_REQUIRE_REDIS=1` (as in CI), where a missing cluster is a failure.
fn cluster() -> Option<String> {
    match std::env::var("NEARDUP_REDIS") {
        Ok(s) if !s.trim().is_empty() => Some(s),
        _ => {
            assert!(
                std::env::var("NEARDUP_REQUIRE_REDIS").as_deref() != Ok("1"),
                "NEARDUP_REQUIRE_REDIS=1 but NEARDUP_REDIS is not set"
            );
            eprintln!(
                "skipped acknowledged_writes_survive_the_failover_of_their_primary: \
                 NEARDUP_REDIS is not set (see scripts/redis-cluster.sh)"
            );
            None
        }
    }
}

/// Starts the killed node again when dropped, so that a failing test leaves the cluster
/// with a replica for every primary (the other Redis tests write with `WAIT 1`).
struct Restart {
    script: &'static str,
    port: String,
    done: bool,
}

impl Restart {
    fn now(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let status = Command::new("bash")
            .args([self.script, "start-node", &self.port])
            .status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "{} start-node {}: {status:?}",
            self.script,
            self.port
        );
    }
}

impl Drop for Restart {
    fn drop(&mut self) {
        if !self.done && !std::thread::panicking() {
            self.now();
        } else if !self.done {
            // Already failing: restart without asserting again.
            self.done = true;
            let _ = Command::new("bash")
                .args([self.script, "start-node", &self.port])
                .status();
        }
    }
}

#[test]
fn acknowledged_writes_survive_the_failover_of_their_primary() {
    let Some(seeds) = cluster() else {
        return;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/redis-cluster.sh"
    );
    let options = RedisOptions {
        namespace: format!("failover-{}", std::process::id()),
        wait_replicas: 1,
        wait_timeout: Duration::from_millis(500),
        timeout: Duration::from_secs(3),
    };
    let config = DocConfig::default();
    let mut store = RedisStore::create(&seeds, options, config, 10_000).unwrap();
    let prep = Preparer::new(config);

    let victim = primaries(&cluster_nodes(&seeds))[0].clone();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut node(&victim))
        .unwrap();
    let pid = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(|p| p.trim().to_string())
        .unwrap();
    let port = victim.rsplit(':').next().unwrap().to_string();

    // The killer: kill -9 the primary while batches are written, wait until the cluster
    // has promoted its replica, then start the node again (it rejoins as the new
    // primary's replica). While the promoted replica has no replica of its own, `WAIT 1`
    // cannot be satisfied for its slots, so batches touching them are refused: refused,
    // never falsely acknowledged.
    let mut killer = Some({
        let seeds = seeds.clone();
        let victim = victim.clone();
        std::thread::spawn(move || {
            let mut restart = Restart {
                script,
                port,
                done: false,
            };
            std::thread::sleep(Duration::from_millis(300));
            let status = Command::new("kill").args(["-9", &pid]).status();
            assert!(matches!(status, Ok(s) if s.success()), "kill -9 {pid}");
            let killed = Instant::now();
            let promoted = loop {
                std::thread::sleep(Duration::from_millis(100));
                let nodes = cluster_nodes(&seeds);
                let up = primaries(&nodes);
                if up.len() == 3 && !up.contains(&victim) && cluster_ok(&seeds) {
                    break killed.elapsed();
                }
                assert!(
                    killed.elapsed() < Duration::from_secs(20),
                    "no replica promoted 20 s after {victim} was killed:\n{nodes}"
                );
            };
            restart.now();
            (promoted, killed.elapsed())
        })
    });

    let started = Instant::now();
    let mut acked: Vec<u64> = Vec::new();
    let mut refused = 0;
    let mut after_rejoin = 0;
    let mut times = None;
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(120) && after_rejoin < 20 {
        if killer.as_ref().is_some_and(|k| k.is_finished()) {
            times = killer.take().map(|k| k.join().unwrap());
        }
        let batch: Vec<u64> = (n..n + 10).collect();
        n += 10;
        let writes = batch
            .iter()
            .map(|&i| Write::Put {
                id: format!("doc-{i}"),
                doc: Box::new(prep.prepare(&text(i), false)),
                ttl: None,
                only_if_unique: false,
            })
            .collect();
        match store.apply(writes) {
            Ok(_) => {
                acked.extend(&batch);
                if times.is_some() {
                    after_rejoin += 1;
                }
            }
            Err(_) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let (promoted, rejoined) = times.expect("the failover finished within 120 s");
    assert!(
        after_rejoin >= 20,
        "the cluster took no writes after the failover ({refused} batches refused)"
    );
    let nodes = cluster_nodes(&seeds);
    assert!(
        !primaries(&nodes).contains(&victim),
        "{victim} is a primary again:\n{nodes}"
    );
    assert!(refused > 0, "no batch was refused while a primary was down");

    // Every acknowledged document is there, by id and by its text.
    let reader = store.reader();
    let mut missing = Vec::new();
    for &i in &acked {
        let id = format!("doc-{i}");
        let t = text(i);
        let got = reader.get(&id).unwrap();
        let found = reader.check_text(&prep, &t).unwrap();
        if got.map(|d| d.signature) != Some(prep.prepare(&t, false).signature)
            || !found.hits.iter().any(|h| h.id == id)
        {
            missing.push(id);
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged documents lost: {missing:?}",
        missing.len(),
        acked.len()
    );
    // Refused batches may have been applied in part, so the count may exceed them.
    assert!(reader.len() >= acked.len());
    eprintln!(
        "failover: {} documents acknowledged, {refused} batches refused; replica promoted \
         {promoted:?} after the kill, {victim} rejoined after {rejoined:?}",
        acked.len()
    );
    store.destroy().unwrap();
}

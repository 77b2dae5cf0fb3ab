//! `--redis` end to end, through the real binary on a real Redis Cluster:
//!
//! - `neardup serve --redis` against `neardup serve --data` as its oracle: the same random
//!   requests (puts plain, gated and with a time to live, deletes, gets, checks of texts and
//!   paragraphs, bulk puts and checks) go to both, and every answer must be equal;
//! - `neardup documents … --data DIR` and `--redis` (and the older `neardup index …
//!   --redis`) against the embedded `DocumentStore` fed the same documents (the data directory
//!   case needs no cluster);
//! - the errors of both (a missing corpus, a corpus made twice, both --data and --redis,
//!   --fingerprints).
//!
//! They need a Redis Cluster: `scripts/redis-cluster.sh start`, then
//! `NEARDUP_REDIS=$(scripts/redis-cluster.sh seeds) cargo test -p neardup-cli --test redis`.
//! Without `NEARDUP_REDIS` they say so and pass, unless `NEARDUP_REQUIRE_REDIS=1` (CI).

mod common;

use std::io::{Read, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::neardup;
use neardup_store::{DocConfig, DocumentStore, Preparer, RedisOptions, RedisStore, Write};
use serde_json::{json, Value};

/// The cluster's seed nodes, or `None` (with a note) when no cluster is configured.
fn cluster(test: &str) -> Option<String> {
    match std::env::var("NEARDUP_REDIS") {
        Ok(seeds) if !seeds.trim().is_empty() => Some(seeds),
        _ => {
            assert!(
                std::env::var("NEARDUP_REQUIRE_REDIS").as_deref() != Ok("1"),
                "{test}: NEARDUP_REQUIRE_REDIS=1 but NEARDUP_REDIS is not set"
            );
            eprintln!("skipped {test}: NEARDUP_REDIS is not set (see scripts/redis-cluster.sh)");
            None
        }
    }
}

/// A namespace no other test uses.
fn namespace(test: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "cli-{}-{test}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Removes a test's corpus from the cluster.
fn destroy(seeds: &str, ns: &str) {
    let options = RedisOptions {
        namespace: ns.to_string(),
        ..RedisOptions::default()
    };
    if let Ok(store) = RedisStore::connect(seeds, options, None) {
        let _ = store.destroy();
    }
}

/// One HTTP/1.1 request on its own connection: the status and the body as JSON.
fn request(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<(u16, Value)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not HTTP: {out:?}")))?;
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let value = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()));
    Ok((status, value))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `neardup serve`, killed when dropped.
struct Served {
    child: Child,
    port: u16,
}

impl Served {
    fn start(store_args: &[&str]) -> Served {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["serve", "--listen", &listen, "--create", "--paragraphs"];
        args.extend_from_slice(store_args);
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while request(port, "GET", "/healthz", "").is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("neardup serve {args:?} exited with {status}: {err}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "serve did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Served { child, port }
    }

    fn send(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        request(self.port, method, path, &body).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// xorshift: the same requests every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A text from one of four bases with a few words replaced (near-duplicates of its base
/// for few edits), in two paragraphs.
fn text(rng: &mut Rng) -> String {
    let base = rng.below(4);
    let mut words: Vec<String> = (0..80)
        .map(|i| format!("b{base}w{}", (i * 37 + base * 11) % 101))
        .collect();
    for _ in 0..rng.below(6) {
        let at = rng.below(80) as usize;
        words[at] = format!("e{}", rng.below(1000));
    }
    format!("{}\n\n{}", words[..40].join(" "), words[40..].join(" "))
}

/// An answer with what must differ between two stores taken out: the absolute expiry
/// times (the two services stamp them a moment apart), kept as whether there is one.
fn normal(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(e) = m.get_mut("expires") {
                    *e = json!(!e.is_null());
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

#[test]
fn serve_over_redis_answers_as_the_embedded_store() {
    let Some(seeds) = cluster("serve_over_redis_answers_as_the_embedded_store") else {
        return;
    };
    let ns = namespace("serve");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let embedded = Served::start(&["--data", data.to_str().unwrap()]);
    let redis = Served::start(&[
        "--redis",
        &seeds,
        "--redis-namespace",
        &ns,
        "--expected",
        "1000",
    ]);
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut kinds = [0usize; 8];
    for step in 0..300 {
        let id = format!("d/{}", rng.below(40));
        let kind = rng.below(8) as usize;
        kinds[kind] += 1;
        let (method, path, body) = match kind {
            0 | 1 => (
                "PUT",
                format!("/v1/documents/{id}"),
                json!({"text": text(&mut rng)}),
            ),
            2 => (
                "PUT",
                format!("/v1/documents/{id}"),
                json!({"text": text(&mut rng), "only_if_unique": true}),
            ),
            3 => (
                "PUT",
                format!("/v1/documents/{id}"),
                json!({"text": text(&mut rng), "ttl": 3600}),
            ),
            4 => ("DELETE", format!("/v1/documents/{id}"), Value::Null),
            5 => ("GET", format!("/v1/documents/{id}"), Value::Null),
            6 => (
                "POST",
                "/v1/check".to_string(),
                json!({"text": text(&mut rng), "paragraphs": rng.below(2) == 0}),
            ),
            _ => {
                let items: Vec<Value> = (0..3)
                    .map(|i| {
                        json!({"id": format!("bulk/{}", rng.below(20) + i), "text": text(&mut rng),
                               "only_if_unique": rng.below(2) == 0})
                    })
                    .collect();
                if rng.below(2) == 0 {
                    ("POST", "/v1/bulk/documents".to_string(), json!(items))
                } else {
                    ("POST", "/v1/bulk/check".to_string(), json!(items))
                }
            }
        };
        let want = embedded.send(method, &path, &body);
        let got = redis.send(method, &path, &body);
        assert_eq!(
            (got.0, normal(got.1)),
            (want.0, normal(want.1)),
            "step {step}: {method} {path} {body}"
        );
    }
    // Every kind of request was made, and the stores hold the same documents.
    assert!(kinds.iter().all(|&k| k > 10), "{kinds:?}");
    let (_, want) = embedded.send("GET", "/healthz", &Value::Null);
    let (_, got) = redis.send("GET", "/healthz", &Value::Null);
    assert_eq!(got["documents"], want["documents"]);
    assert!(want["documents"].as_u64().unwrap() > 20, "{want}");
    drop(redis);
    destroy(&seeds, &ns);
}

/// `neardup <command> ...` with `at` (where the corpus is) answers as the embedded store
/// fed the same documents: inserted (with `only_if_unique` or not), queried, removed by
/// ids on standard input, swept.
fn answers_as_the_embedded_store(command: &str, at: &[&str], only_if_unique: bool) {
    let run = |args: &[&str], stdin: &[u8]| {
        let mut all = vec![command];
        all.extend_from_slice(args);
        all.extend_from_slice(at);
        let o = neardup(&all, stdin);
        assert!(
            o.status.success(),
            "neardup {all:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let mut rng = Rng(0x1DE5_0000_0000_0042);
    let docs: Vec<(String, String)> = (0..60)
        .map(|i| (format!("doc{i}"), text(&mut rng)))
        .collect();
    let queries: Vec<String> = (0..30).map(|_| text(&mut rng)).collect();
    let lines = |items: &mut dyn Iterator<Item = (String, &String)>| {
        items
            .map(|(id, t)| json!({"id": id, "text": t}).to_string() + "\n")
            .collect::<String>()
    };
    let doc_lines = lines(&mut docs.iter().map(|(id, t)| (id.clone(), t)));
    let query_lines = lines(
        &mut queries
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("q{i}"), t)),
    );
    let tmp = tempfile::tempdir().unwrap();
    let doc_file = tmp.path().join("docs.jsonl");
    std::fs::write(&doc_file, &doc_lines).unwrap();

    // The oracle: the embedded store, fed the same documents.
    let config = DocConfig {
        threshold: "0.7".parse().unwrap(),
        paragraphs: false,
    };
    let mut oracle = DocumentStore::create(tmp.path().join("oracle"), config).unwrap();
    let prep = Preparer::new(config);
    let puts = docs
        .iter()
        .map(|(id, t)| Write::Put {
            id: id.clone(),
            doc: Box::new(prep.prepare(t, false)),
            ttl: None,
            only_if_unique,
        })
        .collect();
    oracle.apply(puts).unwrap();
    let expect = |oracle: &DocumentStore| -> String {
        let reader = oracle.reader();
        queries
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let hits = reader.check_text(&prep, t).unwrap().hits;
                let matches: Vec<Value> = hits
                    .into_iter()
                    .map(
                        |h| json!({"id": h.id, "similarity": h.similarity, "distance": h.distance}),
                    )
                    .collect();
                json!({"id": format!("q{i}"), "matches": matches}).to_string() + "\n"
            })
            .collect()
    };

    run(&["create", "--threshold", "0.7", "--expected", "1000"], b"");
    let mut insert = vec!["insert", doc_file.to_str().unwrap()];
    if only_if_unique {
        insert.push("--only-if-unique");
    }
    run(&insert, b"");
    let got = run(&["query"], query_lines.as_bytes());
    let want = expect(&oracle);
    assert_eq!(got, want);
    assert!(
        want.contains("\"similarity\""),
        "some query has matches: {want}"
    );
    let stats: Value = serde_json::from_str(&run(&["stats"], b"")).unwrap();
    assert_eq!(stats["documents"], oracle.len());
    assert_eq!(stats["threshold"], 0.7);
    // Four bases of near-duplicates: gated puts keep few of the 60.
    assert_eq!(oracle.len() < 60, only_if_unique, "{}", oracle.len());

    // Removing a third of them, by ids on standard input.
    let gone: Vec<String> = (0..60).step_by(3).map(|i| format!("doc{i}")).collect();
    run(&["remove"], (gone.join("\n") + "\nnot-stored\n").as_bytes());
    let deletes = gone
        .iter()
        .map(|id| Write::Delete { id: id.clone() })
        .collect();
    oracle.apply(deletes).unwrap();
    assert_eq!(run(&["query"], query_lines.as_bytes()), expect(&oracle));
    run(&["sweep"], b"");
}

#[test]
fn documents_in_a_data_directory_answer_as_the_embedded_store() {
    for only_if_unique in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let at = ["--data", dir.to_str().unwrap()];
        answers_as_the_embedded_store("documents", &at, only_if_unique);
        // What the commands left is a whole store, as the service opens it.
        let o = neardup(&["documents", "check", at[0], at[1]], b"");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let check: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(check["problems"], json!([]), "{check}");
        let opened = DocumentStore::open(&dir, None).unwrap();
        assert_eq!(check["documents"], opened.len());
    }
    let o = neardup(
        &["documents", "stats", "--data", "/tmp/x", "--redis", "h:1"],
        b"",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    let o = neardup(&["documents", "stats", "--data", "/nonexistent/store"], b"");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn documents_over_redis_answer_as_the_embedded_store() {
    let Some(seeds) = cluster("documents_over_redis_answer_as_the_embedded_store") else {
        return;
    };
    for only_if_unique in [false, true] {
        let ns = namespace("documents");
        let at = ["--redis", seeds.as_str(), "--redis-namespace", ns.as_str()];
        answers_as_the_embedded_store("documents", &at, only_if_unique);
        destroy(&seeds, &ns);
    }
}

#[test]
fn index_over_redis_answers_as_the_embedded_store() {
    let Some(seeds) = cluster("index_over_redis_answers_as_the_embedded_store") else {
        return;
    };
    // The form from before `neardup documents`, kept working.
    let ns = namespace("index");
    let at = ["--redis", seeds.as_str(), "--redis-namespace", ns.as_str()];
    answers_as_the_embedded_store("index", &at, false);

    // Errors: clear, with exit 2 for usage and 1 for the cluster.
    let fail = |args: &[&str], code: i32, says: &str| {
        let o = neardup(args, b"");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "neardup {args:?}: {err}");
        assert!(err.contains(says), "neardup {args:?}: {err}");
    };
    let mut create = vec!["index", "create"];
    create.extend_from_slice(&at);
    fail(&create, 1, "already holds a corpus");
    let mut fps = vec!["index", "insert", "--fingerprints"];
    fps.extend_from_slice(&at);
    fail(&fps, 2, "needs their texts");
    fail(
        &[
            "index",
            "stats",
            "--redis",
            &seeds,
            "--redis-namespace",
            "cli-none",
        ],
        1,
        "no corpus under namespace",
    );
    fail(
        &["index", "stats", "/tmp/x", "--redis", &seeds],
        2,
        "not both",
    );
    fail(
        &["serve", "--data", "/tmp/x", "--redis", &seeds],
        2,
        "cannot be used with",
    );
    fail(
        &["serve", "--redis", "127.0.0.1:1"],
        1,
        "Connection refused",
    );
    destroy(&seeds, &ns);
}

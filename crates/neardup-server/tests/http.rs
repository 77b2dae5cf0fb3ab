//! The service end to end over HTTP: every route, every error, the atomic gate under
//! concurrency, expiry, group commit, graceful shutdown, and the same decision as batch
//! deduplication on the bundled corpora.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use neardup::jaccard::Threshold;
use neardup_server::{serve, ServerConfig};
use neardup_store::{Clock, DocConfig, DocumentStore, Opened, MAX_PARAGRAPHS};
use serde_json::{json, Value};
use tokio::sync::oneshot;

struct TestClock(AtomicU64);

impl Clock for TestClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A running service on a free loopback port.
struct Running {
    base: String,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<DocumentStore, neardup_server::ServerError>>,
    _dir: Option<tempfile::TempDir>,
}

impl Running {
    async fn start(
        config: DocConfig,
        server: ServerConfig,
        clock: Option<Arc<TestClock>>,
    ) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let mut store = DocumentStore::create(dir.path(), config).unwrap();
        if let Some(c) = clock {
            store = store.with_clock(c);
        }
        Running::on(store, server, Some(dir)).await
    }

    async fn on(
        store: DocumentStore,
        server: ServerConfig,
        dir: Option<tempfile::TempDir>,
    ) -> Running {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(serve(listener, store, server, async {
            let _ = stopped.await;
        }));
        Running {
            base,
            client: reqwest::Client::new(),
            stop: Some(stop),
            done,
            _dir: dir,
        }
    }

    async fn send(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let mut req = self.client.request(method.parse().unwrap(), url);
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn json(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        self.send(method, path, Some(&body.to_string())).await
    }

    /// `lines` as one JSON Lines body to `POST path`.
    async fn ndjson(&self, path: &str, lines: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-ndjson")
            .body(lines.to_string())
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }

    async fn stop(mut self) -> DocumentStore {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.done.await.unwrap().unwrap()
    }
}

/// A 60-word text of base `b`; `edit` replaces its word 58 (Jaccard about 0.9 with the
/// unedited text).
fn text(b: usize, edit: Option<&str>) -> String {
    let mut words: Vec<String> = (0..60)
        .map(|i| format!("w{}x{}", b, (i * 37 + b * 11) % 101))
        .collect();
    if let Some(e) = edit {
        words[58] = e.to_string();
    }
    words.join(" ")
}

fn error_code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn every_route() {
    let svc = Running::start(DocConfig::default(), ServerConfig::default(), None).await;
    let (s, v) = svc.send("GET", "/healthz", None).await;
    assert_eq!(
        (s, v["status"].as_str(), v["documents"].as_u64()),
        (200, Some("ok"), Some(0))
    );

    let (s, v) = svc
        .json("PUT", "/v1/documents/a", json!({"text": text(0, None)}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        json!({"inserted": true, "replaced": false, "matches": []})
    );
    // A near-duplicate under another id: stored (no gate), and its match reported.
    let (s, v) = svc
        .json(
            "PUT",
            "/v1/documents/py/3.11/b",
            json!({"text": text(0, Some("other"))}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["inserted"], true);
    assert_eq!(v["matches"][0]["id"], "a");
    let sim = v["matches"][0]["similarity"].as_f64().unwrap();
    assert!((0.8..1.0).contains(&sim), "{v}");
    // The gate: refused, with the reason.
    let (s, v) = svc
        .json(
            "PUT",
            "/v1/documents/c",
            json!({"text": text(0, Some("third")), "only_if_unique": true}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["inserted"], false);
    let ids: BTreeSet<&str> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, BTreeSet::from(["a", "py/3.11/b"]));
    // Replacing an id with an unrelated text.
    let (_, v) = svc
        .json(
            "PUT",
            "/v1/documents/a",
            json!({"text": text(5, None), "ttl": 3600}),
        )
        .await;
    assert_eq!(
        (v["inserted"].clone(), v["replaced"].clone()),
        (json!(true), json!(true))
    );

    let (s, v) = svc.send("GET", "/v1/documents/py/3.11/b", None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["id"], "py/3.11/b");
    assert_eq!(v["expires"], Value::Null);
    let fp = v["fingerprint"].as_str().unwrap().to_string();
    let (_, v) = svc.send("GET", "/v1/documents/a", None).await;
    assert!(v["expires"].as_u64().is_some(), "{v}");

    // Check by text and by fingerprint: the same answer.
    let (s, by_text) = svc
        .json(
            "POST",
            "/v1/check",
            json!({"text": text(0, Some("fourth"))}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(by_text["matches"][0]["id"], "py/3.11/b");
    assert!(by_text.get("paragraphs").is_none());
    let (_, by_fp) = svc
        .json("POST", "/v1/check", json!({"fingerprint": fp}))
        .await;
    assert_eq!(by_fp["matches"][0]["id"], "py/3.11/b");
    assert_eq!(by_fp["matches"][0]["similarity"], 1.0);
    // A fingerprint stores like its text.
    let (_, v) = svc
        .json(
            "PUT",
            "/v1/documents/copy",
            json!({"fingerprint": fp, "only_if_unique": true}),
        )
        .await;
    assert_eq!(v["inserted"], false);
    assert_eq!(v["matches"][0]["similarity"], 1.0);

    // Bulk, as an array and as NDJSON.
    let items = json!([
        {"id": "x", "text": text(1, None)},
        {"id": "y", "text": text(1, Some("again")), "only_if_unique": true},
        {"id": "z", "text": text(2, None), "only_if_unique": true},
    ]);
    let (s, v) = svc.json("POST", "/v1/bulk/documents", items).await;
    assert_eq!(s, 200, "{v}");
    let got: Vec<(String, bool)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["inserted"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("x".into(), true), ("y".into(), false), ("z".into(), true)]
    );
    let nd = format!(
        "{}\n\n{}\n",
        json!({"text": text(1, Some("q"))}),
        json!({"text": text(9, None)})
    );
    let (s, v) = svc.ndjson("/v1/bulk/check", &nd).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v[0]["matches"][0]["id"], "x");
    assert_eq!(v[1]["matches"], json!([]));

    let (s, v) = svc.send("DELETE", "/v1/documents/x", None).await;
    assert_eq!((s, v), (200, json!({"removed": true})));
    let (s, v) = svc.send("DELETE", "/v1/documents/x", None).await;
    assert_eq!((s, error_code(&v)), (404, "not_found"));
    let (s, v) = svc.send("GET", "/v1/documents/x", None).await;
    assert_eq!((s, error_code(&v)), (404, "not_found"));

    let (s, v) = svc.send("GET", "/metrics", None).await;
    assert_eq!(s, 200);
    let m = v.as_str().unwrap();
    for name in [
        "neardup_requests_total",
        "neardup_request_seconds_bucket",
        "neardup_documents",
        "neardup_commits_total",
        "neardup_resident_bytes",
        "neardup_disk_written_bytes",
    ] {
        assert!(m.contains(name), "{name} missing");
    }
    assert!(m.contains("route=\"/v1/documents/{*id}\""), "{m}");
    assert!(m.contains("neardup_documents 3"), "{m}"); // a, py/3.11/b, z
    let (s, v) = svc.send("GET", "/v1/openapi.json", None).await;
    assert_eq!(s, 200);
    for path in [
        "/v1/documents/{id}",
        "/v1/check",
        "/v1/bulk/documents",
        "/v1/bulk/check",
        "/healthz",
        "/metrics",
    ] {
        assert!(
            v["paths"].get(path).is_some(),
            "{path} not in the OpenAPI document"
        );
    }
    svc.stop().await;
}

/// A text stored a thousand times crowds its band keys: a check reads the first
/// documents under them only, so a near-duplicate stored after them is not listed, and
/// the answer says it is partial (a put's, single and bulk checks'); a check or put of
/// another text is whole and says nothing of it.
/// Texts NFKC expands (each U+FDFA, 3 bytes, becomes 33) are signed as heavy work, puts
/// and checks alike, and answered as any other.
#[tokio::test]
async fn texts_nfkc_expands_are_stored_and_found() {
    let svc = Running::start(DocConfig::default(), ServerConfig::default(), None).await;
    let expanding = |edit| format!("{} {}", text(0, edit), "\u{FDFA} ".repeat(300));
    let (s, v) = svc
        .json("PUT", "/v1/documents/a", json!({"text": expanding(None)}))
        .await;
    assert_eq!((s, &v["inserted"]), (200, &json!(true)), "{v}");
    for (edit, exact) in [(None, true), (Some("other"), false)] {
        let (s, v) = svc
            .json("POST", "/v1/check", json!({"text": expanding(edit)}))
            .await;
        assert_eq!((s, &v["matches"][0]["id"]), (200, &json!("a")), "{v}");
        let sim = v["matches"][0]["similarity"].as_f64().unwrap();
        assert_eq!(sim == 1.0, exact, "{v}");
    }
}

#[tokio::test]
async fn a_crowded_check_says_it_is_partial() {
    let svc = Running::start(DocConfig::default(), ServerConfig::default(), None).await;
    let copies: Vec<Value> = (0..1000)
        .map(|i| json!({"id": format!("c{i}"), "text": text(1, None)}))
        .collect();
    let (s, v) = svc
        .json("POST", "/v1/bulk/documents", Value::Array(copies))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = svc
        .json(
            "PUT",
            "/v1/documents/late",
            json!({"text": text(1, Some("late"))}),
        )
        .await;
    assert_eq!((s, &v["inserted"]), (200, &json!(true)), "{v}");
    assert_eq!(
        v["partial"], true,
        "a put's matches are found as a check's: {v}"
    );
    let (s, v) = svc
        .json("POST", "/v1/check", json!({"text": text(1, None)}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["partial"], true, "{v}");
    let listed =
        v["matches"].as_array().unwrap().len() as u64 + v["more_matches"].as_u64().unwrap_or(0);
    assert!((64..1001).contains(&listed), "{v}");
    let (s, v) = svc
        .json("POST", "/v1/check", json!({"text": text(2, None)}))
        .await;
    assert_eq!((s, v), (200, json!({"matches": []})));
    let (s, v) = svc
        .json("PUT", "/v1/documents/other", json!({"text": text(2, None)}))
        .await;
    assert_eq!(
        (s, v),
        (
            200,
            json!({"inserted": true, "replaced": false, "matches": []})
        )
    );
    let nd = format!(
        "{}\n{}\n",
        json!({"text": text(1, None)}),
        json!({"text": text(2, None)})
    );
    let (s, v) = svc.ndjson("/v1/bulk/check", &nd).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (&v[0]["partial"], v[1].get("partial")),
        (&json!(true), None),
        "{v}"
    );
    svc.stop().await;
}

#[tokio::test]
async fn every_error_is_a_4xx_with_a_code() {
    let server = ServerConfig {
        body_limit: 2000,
        ..ServerConfig::default()
    };
    let svc = Running::start(DocConfig::default(), server, None).await;
    // (method, path, body, status, code, words of the message)
    type Case<'a> = (&'a str, &'a str, Option<String>, u16, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            "PUT",
            "/v1/documents/a",
            Some("{not json".into()),
            400,
            "bad_json",
            "the body",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("".into()),
            400,
            "bad_json",
            "EOF",
        ),
        // Not JSON, though its first key is one no body has (found by fuzzing: the
        // unknown field was refused, 422, before the syntax was read).
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"txt" "x"}"#.into()),
            400,
            "bad_json",
            "expected `:`",
        ),
        (
            "POST",
            "/v1/bulk/check",
            Some("{\"text\": \"a\"}\n{\"txt\" 1}\n".into()),
            400,
            "bad_json",
            "line 2: expected `:`",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some("{}".into()),
            422,
            "invalid_request",
            "\"text\"",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"text": 5}"#.into()),
            422,
            "invalid_request",
            "invalid type",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"text": "x", "ttl": -1}"#.into()),
            422,
            "invalid_request",
            "ttl",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"text": "x", "only_if_uniq": true}"#.into()),
            422,
            "invalid_request",
            "only_if_uniq",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"text": "x", "fingerprint": "AA=="}"#.into()),
            422,
            "invalid_request",
            "not both",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"fingerprint": "%%%"}"#.into()),
            422,
            "invalid_request",
            "not base64",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(r#"{"fingerprint": "AAAA"}"#.into()),
            422,
            "invalid_request",
            "3 bytes",
        ),
        (
            "PUT",
            "/v1/documents/a",
            Some(format!(r#"{{"text": "{}"}}"#, "x ".repeat(2000))),
            413,
            "too_large",
            "2000 bytes",
        ),
        (
            "POST",
            "/v1/check",
            Some("[1, 2]".into()),
            422,
            "invalid_request",
            "expected a JSON object",
        ),
        (
            "POST",
            "/v1/check",
            Some(r#"{"text": "a b c", "paragraphs": true}"#.into()),
            409,
            "paragraphs_disabled",
            "--paragraphs",
        ),
        (
            "POST",
            "/v1/bulk/documents",
            Some(r#"[{"id": "a", "text": "x"}, {"text": "y"}]"#.into()),
            422,
            "invalid_request",
            "items[1]",
        ),
        (
            "POST",
            "/v1/bulk/documents",
            Some(r#"[{"id": "", "text": "x"}]"#.into()),
            422,
            "invalid_request",
            "id is empty",
        ),
        (
            "POST",
            "/v1/bulk/check",
            Some("{\"text\": \"a\"}\n{\"txt\": \"b\"}\n".into()),
            422,
            "invalid_request",
            "line 2",
        ),
        ("GET", "/v1/documents/nope", None, 404, "not_found", "nope"),
        // An id that is not UTF-8, in the API's error form (found by fuzzing: axum's plain
        // text answer).
        (
            "GET",
            "/v1/documents/%FF%FE",
            None,
            422,
            "invalid_request",
            "UTF-8",
        ),
        (
            "DELETE",
            "/v1/documents/a%FF",
            None,
            422,
            "invalid_request",
            "UTF-8",
        ),
        (
            "PUT",
            "/v1/documents/%C3",
            Some(r#"{"text": "x"}"#.into()),
            422,
            "invalid_request",
            "UTF-8",
        ),
        ("GET", "/v1/nothing", None, 404, "not_found", "no route"),
        (
            "PATCH",
            "/v1/documents/a",
            Some("{}".into()),
            405,
            "method_not_allowed",
            "method",
        ),
        (
            "GET",
            "/v1/check",
            None,
            405,
            "method_not_allowed",
            "method",
        ),
        // A put's options in a query string would be dropped in silence (the document
        // stored though asked to be stored only if unique): refused, naming them.
        (
            "PUT",
            "/v1/documents/q?only_if_unique=true",
            Some(r#"{"text": "x"}"#.into()),
            422,
            "invalid_request",
            "only_if_unique=true",
        ),
        (
            "POST",
            "/v1/bulk/documents?ttl=60",
            Some(r#"[{"id": "q", "text": "x"}]"#.into()),
            422,
            "invalid_request",
            "JSON body",
        ),
    ];
    for (method, path, body, status, code, needle) in cases {
        let (s, v) = svc.send(method, path, body.as_deref()).await;
        assert_eq!(s, status, "{method} {path} {body:?}: {v}");
        assert_eq!(error_code(&v), code, "{method} {path}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains(needle),
            "{method} {path}: {message:?} lacks {needle:?}"
        );
    }
    // Nothing of the refused requests was stored.
    let (_, v) = svc.send("GET", "/healthz", None).await;
    assert_eq!(v["documents"], 0);
    svc.stop().await;
}

#[tokio::test]
async fn the_token_guards_v1_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = DocumentStore::create(dir.path(), DocConfig::default()).unwrap();
    let server = ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    };
    let svc = Running::on(store, server, Some(dir)).await;
    let url = format!("{}/v1/check", svc.base);
    let body = json!({"text": "a b c d e f"}).to_string();
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("s3cret"),
        Some("Bearer s3cre"),
        Some("Bearer"),
        Some("Bearer  "),
        Some("Basic s3cret"),
        Some("Bearers3cret"),
        Some("Bearer s3cret s3cret"),
    ] {
        let mut req = svc.client.post(&url).body(body.clone());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{auth:?}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(error_code(&v), "unauthorized");
    }
    // The scheme's name in any case, white space around the token (RFC 9110 § 11.1).
    for auth in [
        "Bearer s3cret",
        "bearer s3cret",
        "BEARER s3cret",
        "Bearer   s3cret  ",
    ] {
        let resp = svc
            .client
            .post(&url)
            .header("authorization", auth)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{auth:?}");
    }
    let (s, _) = svc.send("GET", "/healthz", None).await;
    assert_eq!(s, 200);
    // Everything under /v1 asks for the token first: unknown routes and methods too, so
    // that nothing about the API answers without it.
    for (method, path) in [
        ("GET", "/v1/openapi.json"),
        ("GET", "/v1/nothing"),
        ("PATCH", "/v1/documents/a"),
        ("GET", "/v1/check"),
        ("GET", "/v1"),
    ] {
        let (s, v) = svc.send(method, path, None).await;
        assert_eq!(
            (s, error_code(&v)),
            (401, "unauthorized"),
            "{method} {path}"
        );
    }
    // Outside /v1, an unknown route is a 404 as before.
    let (s, _) = svc.send("GET", "/nothing", None).await;
    assert_eq!(s, 404);
    svc.stop().await;
}

#[tokio::test]
async fn paragraphs_and_expiry() {
    let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
    let config = DocConfig {
        threshold: Threshold::new(0.8).unwrap(),
        paragraphs: true,
    };
    let svc = Running::start(config, ServerConfig::default(), Some(Arc::clone(&clock))).await;
    let stored = format!("{}\n\n{}", text(0, None), text(1, None));
    let (_, v) = svc
        .json(
            "PUT",
            "/v1/documents/ab",
            json!({"text": stored, "ttl": 10}),
        )
        .await;
    assert_eq!(v["inserted"], true);
    for (id, ttl) in [("cd", 5), ("ef", 5)] {
        let (s, v) = svc
            .json(
                "PUT",
                &format!("/v1/documents/{id}"),
                json!({"text": text(4, None), "ttl": ttl}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    }
    // The longest time to live: an expiry the schema's int64 holds.
    let (s, v) = svc
        .json(
            "PUT",
            "/v1/documents/long",
            json!({"text": "a b c", "ttl": i64::MAX}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = svc.send("GET", "/v1/documents/long", None).await;
    assert_eq!(v["expires"], json!(i64::MAX), "{v}");
    let query = format!("{}\n\n{}", text(1, Some("edited")), text(7, None));
    let (s, v) = svc
        .json(
            "POST",
            "/v1/check",
            json!({"text": query, "paragraphs": true}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["matches"], json!([]), "the whole documents are not near");
    let p = &v["paragraphs"][0];
    assert_eq!(p["id"], "ab");
    let cov = p["coverage"].as_f64().unwrap();
    assert!((cov - 0.5).abs() < 0.01, "{v}");
    let span = &p["spans"][0];
    let (qs, qe) = (
        span["query"][0].as_u64().unwrap() as usize,
        span["query"][1].as_u64().unwrap() as usize,
    );
    assert_eq!(&query[qs..qe], text(1, Some("edited")));
    let (ss, se) = (
        span["stored"][0].as_u64().unwrap() as usize,
        span["stored"][1].as_u64().unwrap() as usize,
    );
    assert_eq!(&stored[ss..se], text(1, None));
    // Expired: it stops matching at once, before any sweep.
    clock.0.fetch_add(11, Ordering::SeqCst);
    let (_, v) = svc
        .json(
            "POST",
            "/v1/check",
            json!({"text": query, "paragraphs": true}),
        )
        .await;
    assert_eq!(v["paragraphs"], json!([]));
    let (s, _) = svc.send("GET", "/v1/documents/ab", None).await;
    assert_eq!(s, 404);
    // Deleting or replacing an expired document answers as the read did: there was none.
    let (s, v) = svc.send("DELETE", "/v1/documents/cd", None).await;
    assert_eq!((s, error_code(&v)), (404, "not_found"), "{v}");
    let (s, v) = svc
        .json("PUT", "/v1/documents/ef", json!({"text": text(5, None)}))
        .await;
    assert_eq!((s, &v["replaced"]), (200, &json!(false)), "{v}");
    let store = svc.stop().await;
    assert_eq!(
        store.len(),
        3,
        "ab expired, not yet swept; cd deleted; ef, long"
    );
}

/// A text of `n` paragraphs, each its own and longer than the shortest one kept alone.
fn paragraphs(n: usize, seed: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "Paragraph {i} of report {seed}: the committee reviewed item {} of the \
                 budget, heard the treasurer on line {}, and agreed that the figures for \
                 section {} should be checked again against the ledger before the vote \
                 of the {}th meeting.",
                i * 7 + seed,
                i * 13 + 1,
                i % 97,
                i + seed
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A put of more paragraphs than a store indexes says how many it left out, alone and in
/// bulk; one within the limit, or one not stored, says nothing of it.
#[tokio::test]
async fn paragraphs_past_the_limit_are_counted_in_the_answer() {
    let config = DocConfig {
        threshold: Threshold::new(0.8).unwrap(),
        paragraphs: true,
    };
    let svc = Running::start(config, ServerConfig::default(), None).await;
    let most = MAX_PARAGRAPHS as usize;
    let long = paragraphs(most + 3, 1);
    assert_eq!(
        neardup::fingerprint::Fingerprinter::default()
            .paragraph_spans(&long)
            .len(),
        most + 3,
        "the test's paragraphs split as written"
    );
    let (s, v) = svc
        .json("PUT", "/v1/documents/long", json!({"text": long}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (&v["inserted"], &v["paragraphs_not_indexed"]),
        (&json!(true), &json!(3)),
        "{v}"
    );
    let (s, v) = svc
        .json(
            "PUT",
            "/v1/documents/again",
            json!({"text": long, "only_if_unique": true}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["inserted"], false, "{v}");
    assert!(v.get("paragraphs_not_indexed").is_none(), "{v}");
    // A check of the text (long enough to be looked up as heavy work) finds the stored
    // document in all but the paragraphs left out.
    let (s, v) = svc
        .json(
            "POST",
            "/v1/check",
            json!({"text": long, "paragraphs": true}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["matches"][0]["id"], "long");
    let found = &v["paragraphs"][0];
    assert_eq!(found["id"], "long");
    let coverage = found["coverage"].as_f64().unwrap();
    assert!(coverage > 0.99 && coverage < 1.0, "{coverage}");
    let lines = [paragraphs(most + 10, 2), paragraphs(most, 3)]
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("bulk{i}"), "text": t}).to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let (s, v) = svc.ndjson("/v1/bulk/documents", &lines).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v[0]["paragraphs_not_indexed"], 10, "{v}");
    assert_eq!(v[1]["inserted"], true, "{v}");
    assert!(v[1].get("paragraphs_not_indexed").is_none(), "{v}");
    svc.stop().await;
}

/// Many concurrent near-identical `only_if_unique` puts: exactly one gets in, and every
/// other one names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gate_is_atomic_under_concurrency() {
    let svc = Arc::new(Running::start(DocConfig::default(), ServerConfig::default(), None).await);
    let mut tasks = Vec::new();
    for i in 0..64 {
        let svc = Arc::clone(&svc);
        tasks.push(tokio::spawn(async move {
            let body = json!({"text": text(3, Some(&format!("v{i}"))), "only_if_unique": true});
            let (_, v) = svc
                .json("PUT", &format!("/v1/documents/doc{i}"), body)
                .await;
            (i, v)
        }));
    }
    let mut winners = Vec::new();
    let mut refused = Vec::new();
    for t in tasks {
        let (i, v) = t.await.unwrap();
        if v["inserted"] == true {
            winners.push(i);
        } else {
            refused.push(v);
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let winner = format!("doc{}", winners[0]);
    for v in refused {
        assert_eq!(v["matches"][0]["id"], winner.as_str(), "{v}");
    }
    let svc = Arc::try_unwrap(svc).ok().unwrap();
    let store = svc.stop().await;
    assert_eq!(store.len(), 1);
}

/// Requests in flight when the shutdown comes are answered, and what they wrote is in
/// the store the service gives back, and on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_finishes_the_writes_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let store = DocumentStore::create(&path, DocConfig::default()).unwrap();
    let svc = Running::on(store, ServerConfig::default(), Some(dir)).await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let (client, base) = (svc.client.clone(), svc.base.clone());
        tasks.push(tokio::spawn(async move {
            let r = client
                .put(format!("{base}/v1/documents/d{i}"))
                .body(json!({"text": text(100 + i, None)}).to_string())
                .send()
                .await;
            match r {
                Ok(resp) if resp.status() == 200 => Some(i),
                _ => None,
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (stop, done) = (svc.stop, svc.done);
    let _ = stop.map(|s| s.send(()));
    let mut acked = Vec::new();
    for t in tasks {
        if let Some(i) = t.await.unwrap() {
            acked.push(i);
        }
    }
    let store = done.await.unwrap().unwrap();
    for i in &acked {
        assert!(
            store.get(&format!("d{i}")).unwrap().is_some(),
            "acknowledged d{i} lost"
        );
    }
    drop(store);
    let store = DocumentStore::open(&path, None).unwrap();
    // The service snapshotted its index as it stopped: the next start reads it whole.
    assert_eq!(store.opened(), &Opened::Snapshot { caught_up: 0 });
    assert!(store.len() >= acked.len());
    for i in &acked {
        assert!(
            store.get(&format!("d{i}")).unwrap().is_some(),
            "acknowledged d{i} not on disk"
        );
    }
}

/// While it runs, the service snapshots its index when it changed, on another thread
/// (catching up from such a snapshot is the store's tests' business).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_taken_while_serving() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let store = DocumentStore::create(&path, DocConfig::default()).unwrap();
    let server = ServerConfig {
        snapshot_every: Some(Duration::from_millis(50)),
        ..ServerConfig::default()
    };
    let svc = Running::on(store, server, None).await;
    for i in 0..20 {
        let (status, _) = svc
            .json(
                "PUT",
                &format!("/v1/documents/d{i}"),
                json!({"text": text(i, None)}),
            )
            .await;
        assert_eq!(status, 200);
    }
    let written = |m: &str| {
        m.lines()
            .find(|l| l.starts_with("neardup_snapshots_total{outcome=\"written\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut waited = 0;
    loop {
        let (_, m) = svc.send("GET", "/metrics", None).await;
        if written(m.as_str().unwrap_or("")) > 0 {
            break;
        }
        waited += 1;
        assert!(waited < 200, "no snapshot in 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(path.join("bands.snapshot").exists());
    let store = svc.stop().await;
    let before = store.len();
    drop(store);
    let store = DocumentStore::open(&path, None).unwrap();
    assert!(matches!(store.opened(), Opened::Snapshot { .. }));
    assert_eq!(store.len(), before);
    assert_eq!(before, 20);
}

fn texts(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Fed in order through the gate, the service keeps what `neardup dedup` keeps.
async fn agrees_with_batch(texts: &[String]) -> usize {
    use neardup::batch::{self, Options, Rule, Source};
    use neardup::decide::Signature;
    let rule = Rule::Jaccard(Threshold::default());
    let fp = neardup::fingerprint::Fingerprinter::default();
    let sigs: Vec<Signature> = texts
        .iter()
        .map(|t| Signature::of_text(&fp, rule.banding(), t))
        .collect();
    let found = batch::dedup(
        &sigs.iter().map(|s| s.fingerprint).collect::<Vec<_>>(),
        &sigs.iter().map(|s| s.text_hash).collect::<Vec<_>>(),
        &texts.iter().map(|t| t.len() as u32).collect::<Vec<_>>(),
        &sigs.iter().map(|s| s.sketch).collect::<Vec<_>>(),
        Source::Bands(&sigs.iter().map(|s| s.bands).collect::<Vec<_>>()),
        &Options::default(),
    )
    .unwrap();
    let removed: BTreeSet<String> = found
        .clusters
        .iter()
        .flat_map(|c| {
            c.members
                .iter()
                .filter(move |m| m.doc != c.representative)
                .map(|m| format!("d{}", m.doc))
        })
        .collect();
    let server = ServerConfig {
        body_limit: 1 << 30,
        ..ServerConfig::default()
    };
    let svc = Running::start(DocConfig::default(), server, None).await;
    let mut refused = BTreeSet::new();
    for chunk in texts.iter().enumerate().collect::<Vec<_>>().chunks(500) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|(i, t)| json!({"id": format!("d{i}"), "text": t, "only_if_unique": true}))
            .collect();
        let (s, v) = svc
            .json("POST", "/v1/bulk/documents", Value::Array(items))
            .await;
        assert_eq!(s, 200);
        for r in v.as_array().unwrap() {
            if r["inserted"] == false {
                refused.insert(r["id"].as_str().unwrap().to_string());
            }
        }
    }
    svc.stop().await;
    assert_eq!(refused, removed);
    removed.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_keeps_what_dedup_keeps() {
    let root = format!("{}/../..", env!("CARGO_MANIFEST_DIR"));
    let planted = texts(&format!(
        "{root}/crates/neardup-cli/tests/fixtures/planted.jsonl"
    ));
    assert!(agrees_with_batch(&planted).await >= 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs NEARDUP_CORPUS, a JSON Lines corpus such as shared/natural's"]
async fn the_service_keeps_what_dedup_keeps_on_a_corpus_from_the_environment() {
    let path = std::env::var("NEARDUP_CORPUS").expect("NEARDUP_CORPUS");
    let removed = agrees_with_batch(&texts(&path)).await;
    eprintln!("{path}: {removed} refused by the service, removed by dedup");
}

/// A body declared over the limit, sent whole at once as most clients send it (without
/// waiting for `100 Continue`): the client reads the 413 and its reason, not a reset of a
/// connection closed on bytes it had not read; and the connection then takes the next
/// request. Declared far over the limit it is not read, only answered.
#[tokio::test]
async fn a_body_over_the_limit_sent_whole_gets_its_answer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = ServerConfig::default();
    let limit = server.body_limit;
    let svc = Running::start(DocConfig::default(), server, None).await;
    let addr = svc.base.trim_start_matches("http://").to_string();
    // Declared, then chunked (refused once the limit is read), twice each.
    for round in 0..4 {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (head, body) = if round % 2 == 0 {
            let body = vec![b'x'; 3 * limit];
            let head = format!(
                "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            (head, body)
        } else {
            let mut body = Vec::new();
            for _ in 0..48 {
                body.extend_from_slice(format!("{:x}\r\n", limit / 16).as_bytes());
                body.extend(std::iter::repeat_n(b'x', limit / 16));
                body.extend_from_slice(b"\r\n");
            }
            body.extend_from_slice(b"0\r\n\r\n");
            let head = "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
            (head.to_string(), body)
        };
        stream.write_all(head.as_bytes()).await.unwrap();
        stream
            .write_all(&body)
            .await
            .unwrap_or_else(|e| panic!("round {round}: sending the body: {e}"));
        // The next request on the same connection, then the two answers.
        let next = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        stream.write_all(next).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut out))
            .await
            .unwrap_or_else(|_| panic!("round {round}: no end"))
            .unwrap_or_else(|e| panic!("round {round}: reading the answer: {e}"));
        let got = String::from_utf8_lossy(&out);
        assert!(got.starts_with("HTTP/1.1 413"), "{got:?}");
        assert!(got.contains(r#""code":"too_large""#), "{got:?}");
        assert_eq!(got.matches("HTTP/1.1 200").count(), 1, "{got:?}");
    }
    // Far over the limit: answered at once, none of it read.
    let head = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        5 * limit
    );
    let got = raw_exchange(&svc.base, head.as_bytes(), Duration::from_secs(5)).await;
    assert!(got.starts_with("HTTP/1.1 413"), "{got:?}");
    svc.stop().await;
}

/// Sends `raw` on a new connection and reads until the server closes it or `wait` passes;
/// what came back.
async fn raw_exchange(base: &str, raw: &[u8], wait: Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn bounds_answer_in_json_and_cap_the_work() {
    let server = ServerConfig {
        max_matches: 3,
        max_bulk_items: 8,
        max_id_bytes: 16,
        ..ServerConfig::default()
    };
    let svc = Running::start(DocConfig::default(), server, None).await;
    // Ids beyond the bound, in a put, a bulk item, a read.
    let long = "x".repeat(17);
    let (s, v) = svc
        .json(
            "PUT",
            &format!("/v1/documents/{long}"),
            json!({"text": "a"}),
        )
        .await;
    assert_eq!((s, error_code(&v)), (422, "invalid_request"), "{v}");
    assert!(v.to_string().contains("more than the limit of 16"), "{v}");
    let items = json!([{"id": "ok", "text": "a"}, {"id": long, "text": "b"}]);
    let (s, v) = svc.json("POST", "/v1/bulk/documents", items).await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v.to_string().contains("items[1]: the id is 17 bytes"),
        "{v}"
    );
    let (s, _) = svc
        .send("GET", &format!("/v1/documents/{long}"), None)
        .await;
    assert_eq!(s, 422);
    // More items than a bulk takes, as an array and as NDJSON: nothing is stored.
    let many: Vec<Value> = (0..9)
        .map(|i| json!({"id": format!("d{i}"), "text": text(i, None)}))
        .collect();
    let (s, v) = svc.json("POST", "/v1/bulk/documents", json!(many)).await;
    assert_eq!((s, error_code(&v)), (413, "too_many_items"), "{v}");
    let ndjson: String = many.iter().map(|v| format!("{v}\n")).collect();
    let (s, v) = svc.send("POST", "/v1/bulk/check", Some(&ndjson)).await;
    assert_eq!((s, error_code(&v)), (413, "too_many_items"), "{v}");
    // Objects where the schema says object: an array of the fields is refused.
    let (s, v) = svc
        .send("PUT", "/v1/documents/a", Some(r#"["some text"]"#))
        .await;
    assert_eq!((s, error_code(&v)), (422, "invalid_request"), "{v}");
    let (s, v) = svc
        .send(
            "POST",
            "/v1/bulk/documents",
            Some(r#"[["a", "some text"]]"#),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v.to_string().contains("items[0]: expected a JSON object"),
        "{v}"
    );
    // A time to live of 0 would store an expired document: refused; 1 is taken.
    let (s, v) = svc
        .json("PUT", "/v1/documents/a", json!({"text": "a", "ttl": 0}))
        .await;
    assert_eq!(s, 422, "{v}");
    let (s, _) = svc
        .json("PUT", "/v1/documents/a", json!({"text": "a", "ttl": 1}))
        .await;
    assert_eq!(s, 200);
    let (_, v) = svc.send("GET", "/healthz", None).await;
    assert_eq!(v["documents"], 1, "only the put with ttl 1 was stored");
    // Seven copies of one text: an answer lists three matches and counts the others.
    let copies: Vec<Value> = (0..7)
        .map(|i| json!({"id": format!("copy{i}"), "text": text(7, None)}))
        .collect();
    let (s, v) = svc.json("POST", "/v1/bulk/documents", json!(copies)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v[6]["matches"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v[6]["more_matches"], 3, "{v}");
    assert!(v[0].get("more_matches").is_none(), "left out when 0: {v}");
    let (s, v) = svc
        .json("POST", "/v1/check", json!({"text": text(7, None)}))
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["matches"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["more_matches"], 4, "{v}");
    let (_, v) = svc
        .json("POST", "/v1/bulk/check", json!([{"text": text(7, None)}]))
        .await;
    assert_eq!(v[0]["more_matches"], 4, "{v}");
    // Header fields over the bound: the API's 431, with a body.
    let resp = svc
        .client
        .get(format!("{}/healthz", svc.base))
        .header("x-big", "v".repeat(70 << 10))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 431);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(error_code(&v), "headers_too_large");
    // A path longer than the longest id allows: 414, with a body.
    let (s, v) = svc
        .send("GET", &format!("/v1/documents/{}", "y".repeat(200)), None)
        .await;
    assert_eq!((s, error_code(&v)), (414, "uri_too_long"), "{v}");
    svc.stop().await;
}

#[tokio::test]
async fn metric_labels_come_from_a_fixed_set() {
    let svc = Running::start(DocConfig::default(), ServerConfig::default(), None).await;
    // Made-up methods and paths, each on its own connection.
    for i in 0..50 {
        let raw = format!("M{i} /x{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        raw_exchange(&svc.base, raw.as_bytes(), Duration::from_secs(5)).await;
    }
    let (_, text) = svc.send("GET", "/metrics", None).await;
    let text = text.as_str().unwrap_or("").to_string();
    assert!(text.contains(r#"method="other""#), "{text}");
    for i in 0..50 {
        assert!(!text.contains(&format!("M{i}\"")), "M{i} made a series");
        assert!(!text.contains(&format!("/x{i}\"")), "/x{i} made a series");
    }
    svc.stop().await;
}

#[tokio::test]
async fn slow_and_idle_clients_are_timed_out() {
    let server = ServerConfig {
        header_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let svc = Running::start(DocConfig::default(), server, None).await;
    let wait = Duration::from_secs(5);
    // A head never finished: the connection is closed, without an answer to wait for.
    let started = std::time::Instant::now();
    let got = raw_exchange(&svc.base, b"POST /v1/check HTTP/1.1\r\nHost: x\r\n", wait).await;
    assert!(
        started.elapsed() < wait,
        "still open after {wait:?}: {got:?}"
    );
    // A body that stops short: 408, in the API's form.
    let raw = b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"text\": ";
    let got = raw_exchange(&svc.base, raw, wait).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
    assert!(got.contains(r#""code":"timeout""#), "{got:?}");
    // An idle keep-alive connection is closed after its answer.
    let started = std::time::Instant::now();
    let got = raw_exchange(&svc.base, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", wait).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(
        started.elapsed() < wait,
        "idle connection still open after {wait:?}"
    );
    // The service answers others meanwhile.
    let (s, _) = svc.send("GET", "/healthz", None).await;
    assert_eq!(s, 200);
    svc.stop().await;
}

/// At the cap, a new connection takes the place of the oldest idle one (which is
/// closed); when every connection is answering a request, it waits for one to finish, and
/// no request being answered is cut off.
#[tokio::test]
async fn connections_beyond_the_cap_replace_idle_ones_or_wait() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = ServerConfig {
        max_connections: 2,
        header_timeout: Duration::from_secs(20),
        body_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let svc = Running::start(DocConfig::default(), server, None).await;
    let addr = svc.base.trim_start_matches("http://").to_string();
    let health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    // Two connections that say nothing hold both places ...
    let mut older = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut newer = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // ... and a third is served at once (long before the head timeout), in the older's place.
    let started = std::time::Instant::now();
    let got = raw_exchange(&svc.base, health, Duration::from_secs(10)).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(5), older.read(&mut byte)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the older is closed: {closed:?}"
    );
    // The newer still works.
    newer.write_all(health).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), newer.read_to_end(&mut answer)).await;
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Two requests whose bodies stop short are being answered: a third waits until their
    // body bound ends them, and they get their answer (408), not a closed connection.
    let short = b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"te";
    let mut busy = Vec::new();
    for _ in 0..2 {
        let base = svc.base.clone();
        busy.push(tokio::spawn(async move {
            raw_exchange(&base, short, Duration::from_secs(10)).await
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = std::time::Instant::now();
    let got = raw_exchange(&svc.base, health, Duration::from_secs(10)).await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "served at once: a busy connection was closed ({:?})",
        started.elapsed()
    );
    for b in busy {
        let got = b.await.unwrap();
        assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
    }
    svc.stop().await;
}

/// Request bodies over 64 KB share `body_memory`: one waits for the room another holds
/// (here until that one's body bound ends it), while small checks are read at once; a
/// body declared over the limit is refused before it is sent, and a compressed one is
/// refused by name.
#[tokio::test]
async fn large_bodies_wait_for_room_and_small_ones_do_not() {
    let words: String = (0..15_000).map(|i| format!("w{} ", i % 997)).collect();
    let body = json!({ "text": words }).to_string();
    // Room for one such body, not two.
    let limit = body.len() + 100;
    assert!(body.len() > 64 << 10);
    let server = ServerConfig {
        body_limit: limit,
        body_memory: limit,
        body_timeout: Duration::from_millis(600),
        ..ServerConfig::default()
    };
    let svc = Running::start(DocConfig::default(), server, None).await;
    let wait = Duration::from_secs(10);
    let head = |len: usize| {
        format!("POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len}\r\n\r\n")
    };
    // A body that stops short holds its room until its bound ends it.
    let mut short = head(body.len()).into_bytes();
    short.extend_from_slice(&body.as_bytes()[..1000]);
    let base = svc.base.clone();
    let holder =
        tokio::spawn(async move { raw_exchange(&base, &short, Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A whole one waits for that room, then is answered.
    let mut whole = head(body.len()).into_bytes();
    whole.extend_from_slice(body.as_bytes());
    let base = svc.base.clone();
    let started = std::time::Instant::now();
    let waiter = tokio::spawn(async move {
        let got = raw_exchange(&base, &whole, Duration::from_secs(10)).await;
        (got, started.elapsed())
    });
    // A small check meanwhile: at once.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let asked = std::time::Instant::now();
    let (s, v) = svc
        .json("POST", "/v1/check", json!({"text": text(1, None)}))
        .await;
    assert_eq!(s, 200, "{v}");
    let small = asked.elapsed();
    // A request without a body (no length: not a chunked one) waits for no room either.
    let asked = std::time::Instant::now();
    let (s, _) = svc.send("GET", "/healthz", None).await;
    assert_eq!(s, 200);
    let bodiless = asked.elapsed();
    let held = holder.await.unwrap();
    assert!(held.starts_with("HTTP/1.1 408"), "{held:?}");
    let (got, waited) = waiter.await.unwrap();
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(
        waited >= Duration::from_millis(300),
        "read while the room was held ({waited:?})"
    );
    assert!(small < waited, "the small check waited too ({small:?})");
    assert!(
        bodiless < Duration::from_millis(300),
        "the GET waited for room ({bodiless:?})"
    );
    // Declared over the limit: 413 before the body comes.
    let got = raw_exchange(&svc.base, head(limit + 1).as_bytes(), wait).await;
    assert!(got.starts_with("HTTP/1.1 413"), "{got:?}");
    assert!(got.contains(r#""code":"too_large""#), "{got:?}");
    // Compressed: refused, not read as plain text.
    let raw = b"POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}";
    let got = raw_exchange(&svc.base, raw, wait).await;
    assert!(got.starts_with("HTTP/1.1 415"), "{got:?}");
    assert!(got.contains(r#""code":"unsupported_encoding""#), "{got:?}");
    // A transfer coding besides chunked: refused, not read as plain text; chunked alone,
    // in any case, is read.
    let raw = b"POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    let got = raw_exchange(&svc.base, raw, wait).await;
    assert!(got.starts_with("HTTP/1.1 501"), "{got:?}");
    assert!(
        got.contains(r#""code":"unsupported_transfer_coding""#),
        "{got:?}"
    );
    let raw = b"POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    let got = raw_exchange(&svc.base, raw, wait).await;
    assert!(got.starts_with("HTTP/1.1 422"), "{got:?}");
    svc.stop().await;
}

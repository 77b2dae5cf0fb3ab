//! The service's request bodies (`neardup serve`): a running server (one per process, on
//! a document store with paragraphs, behind a token) gets the input as the body of one of
//! its routes, over one kept-alive HTTP/1.1 connection. Every answer is a status the API
//! documents (never a 5xx, which would be the server failing on a body), with a JSON body;
//! every error is `{"error": {"code", "message"}}`. Properties: a body that is not JSON is
//! 400 (`bad_json`) on the single-document routes, a request without the token is 401, and
//! a document stored without a time to live is there to GET at once.
//!
//! The first byte picks the route (and content type), an id and whether the token is sent;
//! the rest is the body.
#![no_main]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use neardup::jaccard::Threshold;
use neardup_fuzz::scratch;
use neardup_server::ServerConfig;
use neardup_store::{DocConfig, DocumentStore};
use serde_json::Value;

const TOKEN: &str = "fuzz-token";

/// Ids as they appear in the path: plain, with a slash, percent-encoded (a space, bytes
/// that are not UTF-8, an encoded slash), and empty.
const IDS: [&str; 8] = ["a", "b", "c/d", "e%20f", "%FF%FE", "g%2Fh", "", "i"];

/// The server's port, started on first use.
fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let store = DocumentStore::create(
            scratch().join("service"),
            DocConfig {
                threshold: Threshold::default(),
                paragraphs: true,
            },
        )
        .expect("a store in the scratch directory");
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
        let port = std_listener.local_addr().expect("its address").port();
        std_listener.set_nonblocking(true).expect("non-blocking");
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(std_listener).expect("a tokio listener");
                let config = ServerConfig {
                    token: Some(TOKEN.into()),
                    body_limit: 1 << 20,
                    sweep_every: Duration::from_secs(1),
                    snapshot_every: None,
                    ..ServerConfig::default()
                };
                let _ =
                    neardup_server::serve(listener, store, config, std::future::pending()).await;
            });
        });
        port
    })
}

/// The kept-alive connection, made again when the server closed it.
fn connection() -> &'static Mutex<Option<BufReader<TcpStream>>> {
    static CONN: OnceLock<Mutex<Option<BufReader<TcpStream>>>> = OnceLock::new();
    CONN.get_or_init(|| Mutex::new(None))
}

fn connect() -> BufReader<TcpStream> {
    let port = port();
    for _ in 0..500 {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("a timeout");
            s.set_nodelay(true).expect("nodelay");
            return BufReader::new(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the server does not answer on port {port}");
}

/// One request: the status and the body of the answer.
fn request(method: &str, path: &str, headers: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut conn = connection().lock().expect("the connection's lock");
    // A connection the server closed is made again, once: the request never reached it.
    for attempt in 0..2 {
        let stream = conn.get_or_insert_with(connect);
        match exchange(stream, method, path, headers, body) {
            Ok((status, answer, close)) => {
                if close {
                    *conn = None;
                }
                return (status, answer);
            }
            Err(_) if attempt == 0 => *conn = None,
            Err(e) => panic!("{method} {path}: no answer: {e}"),
        }
    }
    unreachable!("the second attempt returns or panics")
}

/// Writes a request and reads its answer: status, body, and whether the server closes
/// the connection after it.
fn exchange(
    stream: &mut BufReader<TcpStream>,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>, bool)> {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    );
    let s = stream.get_mut();
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut status_line = String::new();
    if stream.read_line(&mut status_line)? == 0 {
        return Err(std::io::Error::other("closed"));
    }
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not HTTP: {status_line:?}")))?;
    let mut length = None;
    let mut close = false;
    loop {
        let mut line = String::new();
        stream.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse::<usize>().ok(),
            "connection" => close = value.trim().eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let mut out = Vec::new();
    match length {
        Some(n) => {
            out.resize(n, 0);
            stream.read_exact(&mut out)?;
        }
        None => {
            stream.read_to_end(&mut out)?;
            close = true;
        }
    }
    Ok((status, out, close))
}

/// The body of an error answer: `{"error": {"code", "message"}}`.
fn error_code(status: u16, body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "{status}: not JSON ({e}): {:?}",
            String::from_utf8_lossy(body)
        )
    });
    let code = v["error"]["code"].as_str();
    let message = v["error"]["message"].as_str();
    assert!(
        code.is_some() && message.is_some_and(|m| !m.is_empty()),
        "{status}: not an error body: {v}"
    );
    code.unwrap_or_default().to_string()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let id = IDS[usize::from(pick >> 4) % IDS.len()];
    let with_token = pick & 8 == 0;
    let auth = if with_token {
        format!("Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    let json = "Content-Type: application/json\r\n";
    let ndjson = "Content-Type: application/x-ndjson\r\n";
    let (method, path, kind, single) = match pick & 7 {
        0 => ("PUT", format!("/v1/documents/{id}"), json, true),
        1 => ("POST", "/v1/check".to_string(), json, true),
        2 => ("POST", "/v1/bulk/documents".to_string(), json, false),
        3 => ("POST", "/v1/bulk/documents".to_string(), ndjson, false),
        4 => ("POST", "/v1/bulk/check".to_string(), json, false),
        5 => ("POST", "/v1/bulk/check".to_string(), ndjson, false),
        6 => ("DELETE", format!("/v1/documents/{id}"), json, false),
        _ => ("GET", format!("/v1/documents/{id}"), json, false),
    };
    let headers = format!("{auth}{kind}");
    let (status, answer) = request(method, &path, &headers, body);

    // Never a failure of the server: only the statuses the API documents.
    assert!(
        matches!(status, 200 | 400 | 401 | 404 | 405 | 409 | 413 | 422),
        "{method} {path}: status {status}: {:?}",
        String::from_utf8_lossy(&answer)
    );
    if status != 200 {
        let code = error_code(status, &answer);
        assert_eq!(status == 401, code == "unauthorized", "{status} {code}");
    } else {
        let _: Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|e| panic!("200 but not JSON ({e}): {answer:?}"));
    }
    if !with_token {
        // (A path no route matches is 404 before any token is asked for.)
        assert!(
            status == 401 || (id.is_empty() && status == 404),
            "{method} {path} without the token: {status}"
        );
        return;
    }
    let parsed = serde_json::from_slice::<Value>(body);
    // (An empty id matches no route, 404, and one that is not UTF-8 is refused, 422, before
    // the body is read.)
    let body_read = method != "PUT" || !(id.is_empty() || id == "%FF%FE");
    if single && body_read && parsed.is_err() {
        assert_eq!(status, 400, "{method} {path}: a body that is not JSON");
    }
    // Stored without a time to live: there at once.
    if method == "PUT" && status == 200 {
        let put: Value = serde_json::from_slice(&answer).unwrap_or_default();
        let ttl = parsed.ok().and_then(|v| v.get("ttl").cloned());
        if put["inserted"] == true && ttl.is_none_or(|t| t.is_null()) {
            let (got, doc) = request("GET", &path, &headers, b"");
            assert_eq!(
                got,
                200,
                "PUT {path} stored it, GET says {:?}",
                String::from_utf8_lossy(&doc)
            );
        }
    }
});

//! `neardup serve` as a process: it starts, answers, stops cleanly on SIGTERM, and a kill
//! -9 under write load loses no acknowledged write, trial after trial on the same store.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::neardup;

/// One HTTP/1.1 request on its own connection: the status and the body.
fn request(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
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
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `neardup serve` and waits until it answers.
fn start(dir: &str, port: u16, create: bool) -> Child {
    start_with(dir, port, create, &[])
}

/// Starts `neardup serve` with `extra` arguments and waits until it answers.
fn start_with(dir: &str, port: u16, create: bool, extra: &[&str]) -> Child {
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["serve", "--data", dir, "--listen", &listen];
    if create {
        args.push("--create");
    }
    args.extend(extra);
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while request(port, "GET", "/healthz", "").is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "neardup serve exited with {status}: {}",
                stderr_of(&mut child)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// What an exited server wrote on standard error.
fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

fn text(i: u64) -> String {
    (0..40)
        .map(|j| format!("t{}", (i * 7919 + j * 104_729) % 1_000_003))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn stops_on_sigterm_with_its_writes_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap();
    let port = free_port();
    let mut child = start(data, port, true);
    let (s, body) = request(
        port,
        "PUT",
        "/v1/documents/a",
        &format!(r#"{{"text": "{}"}}"#, text(1)),
    )
    .unwrap();
    assert_eq!(s, 200, "{body}");
    // SIGTERM: a clean stop, exit 0.
    // SAFETY: kill(2) on our own child's pid.
    let pid = child.id() as i32;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    // Opened again with a page cache of its own size: the document is there.
    let mut child = start_with(data, port, false, &["--cache-mb", "8"]);
    let (s, body) = request(port, "GET", "/v1/documents/a", "").unwrap();
    assert_eq!(s, 200, "{body}");
    child.kill().unwrap();
    child.wait().unwrap();
    // Bad settings are errors with exit 2, before anything listens.
    let o = neardup(&["serve", "--data", data, "--cache-mb", "0"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cache-mb"));
    let o = neardup(&["serve", "--data", data, "--create"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already a neardup data directory"));
    let o = neardup(&["serve", "--data", "/nonexistent/x"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a neardup data directory"));
    let o = neardup(&["serve", "--data", data, "--threshold", "0.7"], b"");
    assert_eq!(o.status.code(), Some(2), "--threshold needs --create");
    // --memory covers the request bodies: 256 MB and 64 KB for each of 1,024 connections
    // by default, 4 MB (one body) and 64 KB for each of 16 when set lower.
    let o = neardup(&["serve", "--data", data, "--memory", "300M"], b"");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("after the request bodies' 320 MB"), "{err}");
    let lower = ["--body-memory", "1M", "--max-connections", "16"];
    let o = neardup(
        &[&["serve", "--data", data, "--memory", "5M"][..], &lower].concat(),
        b"",
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("the request bodies' 5 MB"));
    // The store's share, too small for the page cache: the message says where it went.
    let o = neardup(
        &[&["serve", "--data", data, "--memory", "300M"][..], &lower].concat(),
        b"",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the memory budget is 295 MB (--memory 300 MB, less 5 MB for request bodies)"),
        "{err}"
    );
    let mut child = start_with(
        data,
        port,
        false,
        &[&["--memory", "300M", "--cache-mb", "8"][..], &lower].concat(),
    );
    let (s, body) = request(port, "GET", "/metrics", "").unwrap();
    assert_eq!(s, 200, "{body}");
    let budget = (300u64 << 20) - (4 << 20) - 16 * (64 << 10);
    assert!(
        body.contains(&format!("neardup_memory_budget_bytes {budget}")),
        "{body}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // Without --memory nothing bounds the store: a start whose model needs more than the
    // machine's RAM (here a page cache larger than it) warns, and one that fits does not.
    let machine_mb = neardup_cli::find::machine_memory().expect("MemTotal in /proc/meminfo") >> 20;
    let warning = "more than this machine's";
    for (cache_mb, warns) in [(machine_mb + 1024, true), (8, false)] {
        let cache = cache_mb.to_string();
        let mut child = start_with(data, port, false, &["--cache-mb", &cache]);
        child.kill().unwrap();
        child.wait().unwrap();
        let err = stderr_of(&mut child);
        assert_eq!(err.contains(warning), warns, "--cache-mb {cache}: {err}");
    }
}

/// What the writers were told, per id: stored, or removed; or, for a delete cut off by
/// the kill (the one call in flight), either.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Acked {
    Stored,
    Removed,
    Either,
}

/// Trials alternate quick-repair on (the default) and off: the start after a kill of a
/// server committing with it on reads redb's saved allocator state, with it off repairs
/// the file by reading all of it, and says so.
#[test]
fn kill_9_under_write_load_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap().to_string();
    let acked: Arc<Mutex<BTreeMap<String, Acked>>> = Arc::default();
    let mut replayed = false;
    for trial in 0..6u64 {
        let quick = trial % 2 == 0;
        let setting: &[&str] = if quick {
            &[]
        } else {
            &["--quick-repair", "false"]
        };
        let port = free_port();
        let mut child = start_with(&data, port, trial == 0, setting);
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let acked = Arc::clone(&acked);
                std::thread::spawn(move || {
                    for n in 0u64.. {
                        let id = format!("t{trial}-w{w}-{n}");
                        let body = format!(
                            r#"{{"text": "{}"}}"#,
                            text(trial * 1_000_000 + w * 100_000 + n)
                        );
                        match request(port, "PUT", &format!("/v1/documents/{id}"), &body) {
                            Ok((200, b)) if b.contains("\"inserted\":true") => {
                                acked.lock().unwrap().insert(id, Acked::Stored);
                            }
                            Ok((s, b)) => panic!("PUT {id}: {s} {b}"),
                            Err(_) => return,
                        }
                        if n % 5 == 4 {
                            let gone = format!("t{trial}-w{w}-{}", n - 2);
                            match request(port, "DELETE", &format!("/v1/documents/{gone}"), "") {
                                Ok((200, _)) => {
                                    acked.lock().unwrap().insert(gone, Acked::Removed);
                                }
                                Ok((s, b)) => panic!("DELETE {gone}: {s} {b}"),
                                Err(_) => {
                                    acked.lock().unwrap().insert(gone, Acked::Either);
                                    return;
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(150 + trial * 97 % 400));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for w in writers {
            w.join().unwrap();
        }
        // Every acknowledged write of every trial so far is there after the restart.
        let port = free_port();
        let mut child = start_with(&data, port, false, setting);
        let acked = acked.lock().unwrap();
        assert!(!acked.is_empty());
        for (id, state) in acked.iter() {
            let (s, body) = request(port, "GET", &format!("/v1/documents/{id}"), "").unwrap();
            let ok = match state {
                Acked::Stored => s == 200,
                Acked::Removed => s == 404,
                Acked::Either => s == 200 || s == 404,
            };
            assert!(
                ok,
                "trial {trial}: {id} was acknowledged {state:?}, got {s}: {body}"
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let err = stderr_of(&mut child);
        assert_eq!(
            err.contains("was not closed cleanly"),
            !quick,
            "trial {trial}, quick-repair {quick}: {err}"
        );
        replayed |= err.contains("replayed from the write-ahead log");
    }
    // Writes acknowledged from the log alone, not yet checkpointed, were among those kept.
    assert!(replayed);
}

/// A store that cannot serve is exit 2 naming its file, before anything listens: cut
/// short, or with its token file being the store's own file (written over while serving).
/// A standard error that cannot be written (`2>/dev/full`) loses the messages, not the
/// service.
#[test]
fn a_damaged_store_or_a_token_in_the_store_is_refused_and_stderr_may_be_full() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap();
    let port = free_port();
    let mut child = start(data, port, true);
    let (s, body) = request(
        port,
        "PUT",
        "/v1/documents/a",
        &format!(r#"{{"text": "{}"}}"#, text(1)),
    )
    .unwrap();
    assert_eq!(s, 200, "{body}");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());

    let file = format!("{data}/neardup.redb");
    let o = neardup(&["serve", "--data", data, "--token-file", &file], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is the token file"), "{err}");

    if std::path::Path::new("/dev/full").exists() {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["serve", "--data", data, "--listen", &listen])
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::options()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .spawn()
            .unwrap();
        let started = Instant::now();
        while request(port, "GET", "/healthz", "").is_err() {
            assert_eq!(child.try_wait().unwrap(), None, "serve exited");
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "serve did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(request(port, "GET", "/v1/documents/a", "").unwrap().0, 200);
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "{status} (101 is a panic on the full stderr)"
        );
    }

    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, &whole[..whole.len() / 2]).unwrap();
    let o = neardup(&["serve", "--data", data], b"");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("neardup.redb") && err.contains("damaged") && err.contains("cut short"),
        "{err}"
    );
}

/// Token files that could never match, or that anyone may change, are refused at start
/// (exit 2 naming the file), before the store is opened; a short token starts with a
/// warning.
#[test]
fn token_files_are_checked_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap();
    let cases: [(&str, &[u8], u32, &str); 6] = [
        ("empty", b"", 0o600, "is empty"),
        ("blank", b"\n", 0o600, "is empty"),
        ("spaces", b"   \n", 0o600, "holds ' '"),
        ("trailing", b"s3cret-token-0123 \n", 0o600, "holds ' '"),
        (
            "lines",
            b"s3cret-token-0123\nsecond\n",
            0o600,
            "holds '\\n'",
        ),
        (
            "open",
            b"s3cret-token-0123\n",
            0o666,
            "writable by every user",
        ),
    ];
    for (name, content, mode, needle) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, content).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let file = file.to_str().unwrap();
        let o = neardup(
            &["serve", "--data", data, "--create", "--token-file", file],
            b"",
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(file) && err.contains(needle), "{name}: {err}");
        assert!(!std::path::Path::new(data).exists(), "{name}: store made");
    }
    // A short token serves, with a warning; the scheme's name in any case.
    let file = dir.path().join("short");
    std::fs::write(&file, "abc\r\n").unwrap();
    let port = free_port();
    let mut child = start_with(data, port, true, &["--token-file", file.to_str().unwrap()]);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /v1/documents/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: bEaReR  abc\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
    let err = stderr_of(&mut child);
    assert!(
        err.contains("warning: the token in") && err.contains("fewer than 16"),
        "{err}"
    );
}

/// A full disk, as the files' size limit (RLIMIT_FSIZE, with SIGXFSZ ignored, so writes
/// past it fail with EFBIG as they would with ENOSPC): every write is answered 200 (and
/// is there after a restart), or 503 `not_stored` (and is not), or 503 `outcome_unknown`;
/// never a 500. Once the database itself cannot write, `/healthz` says so with 503 and
/// the service exits non-zero, for a supervisor to start it again; the restart, with
/// room, keeps every acknowledged write.
#[test]
fn a_full_disk_never_loses_or_invents_a_write_and_the_service_says_so() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let data = data.to_str().unwrap().to_string();
    let port = free_port();
    let mut child = start(&data, port, true);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
    let largest = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    let limit = largest + (512 << 10);
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut command = Command::new(env!("CARGO_BIN_EXE_neardup"));
    command
        .args(["serve", "--data", &data, "--listen", &listen])
        .args(["--checkpoint-every", "50", "--snapshot-every", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only async-signal-safe calls: setrlimit and signal.
    unsafe {
        command.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: limit,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while request(port, "GET", "/healthz", "").is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (mut stored, mut refused, mut unsure) = (Vec::new(), Vec::new(), Vec::new());
    let mut failing = false;
    let mut lost = None;
    // When the database file grows past the limit depends on redb's allocation and on how
    // many commits the timing made: a few thousand writes here, more on a slower machine.
    // Long ids make rows of about 500 bytes (a row of a short id is about 190: the file
    // would take tens of thousands before it grew).
    for n in 0..20_000u64 {
        let id = format!("d{n}-{}", "i".repeat(300));
        let body = format!(r#"{{"text": "{} {}"}}"#, text(n), "filler ".repeat(300));
        match request(port, "PUT", &format!("/v1/documents/{id}"), &body) {
            Ok((200, b)) => {
                assert!(b.contains("\"inserted\":true"), "{b}");
                stored.push(id);
            }
            Ok((503, b)) if b.contains("\"not_stored\"") => refused.push(id),
            Ok((503, b)) if b.contains("\"outcome_unknown\"") => unsure.push(id),
            // The store failed earlier and takes nothing more; the service is stopping.
            Ok((503, b))
                if b.contains("\"store_unavailable\"") || b.contains("\"unavailable\"") =>
            {
                refused.push(id)
            }
            Ok((s, b)) => panic!("PUT {id}: {s} {b}"),
            Err(e) => {
                lost = Some(format!("PUT {id}: {e}"));
                break;
            }
        }
        if let Ok((s, b)) = request(port, "GET", "/healthz", "") {
            if s == 503 {
                assert!(b.contains("\"failing\""), "{b}");
                failing = true;
            }
        }
        if refused.len() + unsure.len() >= 20 || failing {
            break;
        }
    }
    // The service may stop on its own failure between two checks of `/healthz` (the
    // store failed in a commit that answered no write of ours): its exit says so then.
    if lost.is_some() && !failing {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                failing = !status.success();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(
        !stored.is_empty(),
        "nothing was stored before the disk filled"
    );
    assert!(
        !refused.is_empty() || !unsure.is_empty() || failing,
        "the limit of {limit} bytes was never reached ({} stored; {lost:?})",
        stored.len()
    );
    // A failed store stops the service, non-zero; one whose log only was full is stopped
    // here.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if !failing && Instant::now() > deadline - Duration::from_secs(55) {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        assert!(Instant::now() < deadline, "the service did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = stderr_of(&mut child);
    eprintln!(
        "limit {limit} bytes: {} stored, {} not stored, {} unsure, store failed: {failing}, {status}",
        stored.len(),
        refused.len(),
        unsure.len()
    );
    // A failed store stops the service with a non-zero status and says why; one that
    // never failed (only its log was full) stopped cleanly on SIGTERM.
    assert_eq!(
        !status.success(),
        err.contains("the store failed"),
        "{status}: {err}"
    );
    if failing {
        assert!(!status.success(), "a failed store exits non-zero: {err}");
    }
    // With room again: every acknowledged write is there, no refused one is.
    let port = free_port();
    let mut child = start(&data, port, false);
    for id in &stored {
        let (s, b) = request(port, "GET", &format!("/v1/documents/{id}"), "").unwrap();
        assert_eq!(s, 200, "{id} was acknowledged: {b}");
    }
    for id in &refused {
        let (s, b) = request(port, "GET", &format!("/v1/documents/{id}"), "").unwrap();
        assert_eq!(s, 404, "{id} was answered not stored: {b}");
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
}

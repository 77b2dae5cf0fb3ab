//! Accepting connections with the bounds an exposed service needs, which `axum::serve`
//! does not set: a cap on open connections, and a deadline for each request's head that
//! also closes idle keep-alive connections (hyper starts it whenever a connection waits
//! for a head: at its start and after each response). Bodies have their deadline in the
//! router ([`crate::read_body`]), where the answer can be the API's JSON.
//!
//! At the cap, a new connection takes the place of the oldest idle one (no request being
//! answered on it: a keep-alive connection between requests, or one still sending its
//! head), which is closed; only when every connection is answering a request does it
//! wait for one to finish. Without that, one client holding 2,100 sockets that never
//! sent a byte (each reopened when the head timeout closed it) kept every other client
//! out: its checks waited 30 s for a connection.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};

/// How long a stopping service waits for open connections to finish their requests.
const DRAIN: Duration = Duration::from_secs(30);

/// The bounds of [`run`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Open connections at most: a new one then takes the place of the oldest idle one,
    /// or waits for one to close when none is idle.
    pub(crate) max_connections: usize,
    /// Time a connection has to send a request's head.
    pub(crate) header_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting and gives the
/// open connections [`DRAIN`] to finish what they are answering.
pub(crate) async fn run(
    listener: TcpListener,
    app: Router,
    bounds: Bounds,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(bounds.max_connections.max(1)));
    let open: Arc<Mutex<VecDeque<Weak<Open>>>> = Arc::default();
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors or memory, or a connection reset before it was
                    // taken: none of them stops the service. A short pause lets a full
                    // table drain instead of spinning on it.
                    if !is_connection_error(&e) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let permit = match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                close_oldest_idle(&open);
                tokio::select! {
                    permit = Arc::clone(&permits).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        // Small answers go out at once rather than after Nagle's delay.
        let _ = stream.set_nodelay(true);
        let this = Arc::new(Open::default());
        if let Ok(mut list) = open.lock() {
            list.push_back(Arc::downgrade(&this));
        }
        let tower = TowerToHyperService::new(app.clone());
        let serving = Arc::clone(&this);
        let service = hyper::service::service_fn(move |request| {
            let busy = Busy::new(&serving);
            let answer = hyper::service::Service::call(&tower, request);
            // Busy until the answer's body is written, not only until it is made.
            async move {
                Ok::<_, std::convert::Infallible>(
                    answer.await?.map(|body| Sent { body, _busy: busy }),
                )
            }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let mut connection = pin!(connection);
            loop {
                tokio::select! {
                    // A client that goes away or breaks the protocol ends its own
                    // connection only.
                    _ = &mut connection => break,
                    () = this.close.notified() => {
                        // Only this task polls the connection, so no request can start
                        // between this look and the close.
                        if this.busy.load(Ordering::Acquire) == 0 {
                            break;
                        }
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    // Connections still open after the drain are dropped with the runtime.
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

/// An open connection: how many requests are being answered on it, and the signal that
/// closes it if it is idle.
#[derive(Default)]
struct Open {
    busy: AtomicUsize,
    close: Notify,
}

/// Counts a request being answered on a connection while it lives.
struct Busy(Arc<Open>);

impl Busy {
    fn new(open: &Arc<Open>) -> Busy {
        open.busy.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(open))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, holding its connection busy until hyper has written it (and
/// dropped it).
struct Sent {
    body: axum::body::Body,
    _busy: Busy,
}

impl axum::body::HttpBody for Sent {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Asks the oldest open connection answering no request to close, and forgets the
/// connections that have closed; does nothing when every one is busy.
fn close_oldest_idle(open: &Mutex<VecDeque<Weak<Open>>>) {
    let Ok(mut list) = open.lock() else {
        return;
    };
    list.retain(|c| c.strong_count() > 0);
    let idle = list.iter().position(|c| {
        c.upgrade()
            .is_some_and(|c| c.busy.load(Ordering::Acquire) == 0)
    });
    if let Some(at) = idle {
        if let Some(c) = list.remove(at).and_then(|c| c.upgrade()) {
            c.close.notify_one();
        }
    }
}

/// Errors of one connection that `accept` reports, which say nothing about the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

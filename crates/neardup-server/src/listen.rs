//! Accepting connections with the bounds an exposed service needs, which `axum::serve`
//! does not set: a cap on open connections, and a deadline for each request's head that
//! also closes idle keep-alive connections (hyper starts it whenever a connection waits
//! for a head: at its start and after each response). Bodies have their deadline in the
//! router ([`crate::read_body`]), where the answer can be the API's JSON.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How long a stopping service waits for open connections to finish their requests.
const DRAIN: Duration = Duration::from_secs(30);

/// The bounds of [`run`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Open connections at most: more wait in the listen backlog until one closes.
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
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
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
        // Small answers go out at once rather than after Nagle's delay.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that goes away or breaks the protocol ends its own connection only.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    // Connections still open after the drain are dropped with the runtime.
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

/// Errors of one connection that `accept` reports, which say nothing about the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

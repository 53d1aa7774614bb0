//! A cap on the connections the query port holds open at once
//! (`query.max_connections`): past it, a new connection is closed as soon
//! as it is accepted, before a byte of it is read, so callers that never
//! authenticate cannot hold the server's memory and file descriptors
//! without bound. The connections in force keep being served; a slot is
//! free again when one of them closes.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt as _};
use tonic::transport::server::Connected;

/// A connection holding one of the cap's slots while it is open.
#[derive(Debug)]
pub struct Limited<IO> {
    io: IO,
    _slot: OwnedSemaphorePermit,
}

/// `incoming` with at most `max` connections open at once; the ones over
/// it are closed on arrival (and counted in a warning: the first, then
/// every 1000th).
pub fn limit<S, IO, E>(incoming: S, max: usize) -> impl Stream<Item = Result<Limited<IO>, E>>
where
    S: Stream<Item = Result<IO, E>>,
{
    let slots = Arc::new(Semaphore::new(max));
    let refused = AtomicU64::new(0);
    incoming.filter_map(move |accepted| match accepted {
        Err(e) => Some(Err(e)),
        Ok(io) => match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(Ok(Limited { io, _slot: slot })),
            Err(_) => {
                let n = refused.fetch_add(1, Ordering::Relaxed) + 1;
                if n == 1 || n.is_multiple_of(1000) {
                    tracing::warn!(
                        open = max,
                        refused = n,
                        "query.max_connections connections are open: new ones are closed"
                    );
                }
                // Dropped: closed before anything of it is read.
                None
            }
        },
    })
}

impl<IO: AsyncRead + Unpin> AsyncRead for Limited<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Limited<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl<IO: Connected> Connected for Limited<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

//! The simulator's listener: connections whose reads keep the kernel's arrival stamp (see [`llmbench_model::rx_stamp`]),
//! so a request's clock — its TTFT and every token deadline after it — starts when the request reached the
//! socket, not when a busy worker got around to parsing it. A client's measurement is then checked against the
//! time the request really arrived.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use llmbench_model::rx_stamp;

/// Accepts connections with Nagle off (token events are tiny writes) and kernel receive stamps on.
pub(crate) struct StampedListener(pub TcpListener);

impl Listener for StampedListener {
    type Io = StampedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((stream, addr)) => {
                    if let Err(error) = stream.set_nodelay(true) {
                        tracing::debug!(%error, "cannot set TCP_NODELAY on a simulator connection");
                    }
                    rx_stamp::enable(&stream);
                    let io = StampedStream {
                        inner: stream,
                        last_stamp: Arc::default(),
                    };
                    return (io, addr);
                }
                // One connection's trouble (it went away before we took it) is no reason to pause.
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                    ) => {}
                // Out of file descriptors and the like: wait for connections to close, as axum's own listener.
                Err(error) => {
                    tracing::error!(%error, "simulator accept failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// A connection that remembers the kernel's stamp of the last bytes it read.
pub(crate) struct StampedStream {
    inner: TcpStream,
    /// Nanoseconds since the Unix epoch; 0 before the first stamped read.
    last_stamp: Arc<AtomicU64>,
}

impl AsyncRead for StampedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.inner.poll_read_ready(cx))?;
            let read = rx_stamp::read_scratch(&this.inner, buf.remaining(), |bytes, stamp| {
                buf.put_slice(bytes);
                stamp
            });
            match read {
                Ok(stamp) => {
                    if let Some(stamp) = stamp {
                        this.last_stamp.store(stamp, Ordering::Relaxed);
                    }
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale; `poll_read_ready` registers for the next.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for StampedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A handler's view of its connection's last stamp (axum `ConnectInfo`).
#[derive(Debug, Clone)]
pub(crate) struct RequestArrival(Arc<AtomicU64>);

impl RequestArrival {
    /// When the request being handled reached the socket: HTTP/1 carries one request at a time, so the last
    /// bytes read on its connection are the end of it. Now, where the kernel gave no stamp.
    pub fn instant(&self) -> Instant {
        let now = Instant::now();
        rx_stamp::age(self.0.load(Ordering::Relaxed))
            .and_then(|age| now.checked_sub(age))
            .unwrap_or(now)
    }
}

impl Connected<IncomingStream<'_, StampedListener>> for RequestArrival {
    fn connect_info(stream: IncomingStream<'_, StampedListener>) -> Self {
        Self(Arc::clone(&stream.io().last_stamp))
    }
}

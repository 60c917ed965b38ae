//! When bytes reached a socket, from the kernel (Linux `SO_TIMESTAMPNS`), rather than when this process got
//! around to reading them: a busy process must not add its own wake-up delay to a latency it measures (the
//! engine) or to a latency it is the truth of (the simulator). Where the kernel gives no stamp, callers use the
//! time the read returned.

use std::cell::RefCell;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpStream;

/// Stamps older than this are not trusted: they would come from another clock, not from a slow read.
const MAX_AGE: Duration = Duration::from_secs(60);

/// Asks the kernel to stamp what arrives on `stream`; without it, reads still work, unstamped.
pub fn enable(stream: &TcpStream) {
    #[cfg(target_os = "linux")]
    if let Err(error) =
        nix::sys::socket::setsockopt(stream, nix::sys::socket::sockopt::ReceiveTimestampns, &true)
    {
        tracing::debug!(%error, "no kernel receive timestamps on this socket");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

/// How long ago the kernel stamped bytes at `stamp_ns` (nanoseconds since the Unix epoch, CLOCK_REALTIME).
/// Only this age is read off the wall clock, so a wall-clock step during a run cannot move a timestamp by more
/// than the age itself. `None` for an implausible stamp.
pub fn age(stamp_ns: u64) -> Option<Duration> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let age = now.checked_sub(Duration::from_nanos(stamp_ns))?;
    (age < MAX_AGE).then_some(age)
}

/// Room for the stamp's control message, to pass to [`read`].
pub(crate) fn control_buffer() -> Vec<u8> {
    #[cfg(target_os = "linux")]
    return nix::cmsg_space!(nix::sys::time::TimeSpec);
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// The most [`read_scratch`] reads per system call.
pub const SCRATCH: usize = 64 * 1024;

thread_local! {
    /// One read buffer per thread, zeroed once: a connection holds no buffer between reads, and no read pays for
    /// initialising memory the kernel is about to overwrite (the simulator did, 8 KiB and more per request).
    static SCRATCH_BUF: RefCell<(Vec<u8>, Vec<u8>)> = RefCell::new((vec![0; SCRATCH], control_buffer()));
}

/// One non-blocking read of at most `limit` bytes into this thread's scratch buffer: `with` sees the bytes (none
/// at the end of the stream) and the kernel's stamp of the last of them. `WouldBlock` when nothing is ready.
/// `with` must not read again.
pub fn read_scratch<R>(
    stream: &TcpStream,
    limit: usize,
    with: impl FnOnce(&[u8], Option<u64>) -> R,
) -> io::Result<R> {
    SCRATCH_BUF.with_borrow_mut(|(data, control)| {
        let data = &mut data[..limit.min(SCRATCH)];
        let (n, stamp) = read(stream, data, control)?;
        Ok(with(&data[..n], stamp))
    })
}

/// One non-blocking read into `data`: the byte count and the kernel's stamp of the last bytes read, if it gave
/// one. `WouldBlock` when nothing is ready, as `TcpStream::try_read`.
///
/// A read that filled less than `data` emptied the socket, so the stream is marked not readable at once: the
/// caller's next `readable().await` waits for the next bytes instead of returning at once into a read that can
/// only fail with `WouldBlock` — one system call less per read, i.e. per streamed chunk at a fast server. This is
/// what tokio's own `poll_read` does on epoll (`tokio/src/io/poll_evented.rs`, 1.54.1, tokio-rs/tokio#5866):
/// epoll is edge-triggered there, so bytes arriving after the read raise readiness again, and tokio clears only the
/// readiness this read observed, never a newer one.
pub fn read(
    stream: &TcpStream,
    data: &mut [u8],
    control: &mut [u8],
) -> io::Result<(usize, Option<u64>)> {
    #[cfg(target_os = "linux")]
    {
        let mut drained = None;
        let read = stream.try_io(tokio::io::Interest::READABLE, || {
            let room = data.len();
            let (n, stamp) = linux::recv_stamped(stream, data, control)?;
            if 0 < n && n < room {
                drained = Some((n, stamp));
                // `try_io` clears the readiness it observed on `WouldBlock`; the bytes are returned below.
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok((n, stamp))
        });
        match drained {
            Some(read) => Ok(read),
            None => read,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = control;
        stream.try_read(data).map(|n| (n, None))
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::io::IoSliceMut;
    use std::os::fd::AsRawFd as _;

    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use tokio::net::TcpStream;

    pub(crate) fn recv_stamped(
        stream: &TcpStream,
        data: &mut [u8],
        control: &mut [u8],
    ) -> io::Result<(usize, Option<u64>)> {
        let mut iov = [IoSliceMut::new(data)];
        let message = recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(control),
            MsgFlags::empty(),
        )
        .map_err(io::Error::from)?;
        let stamp = message.cmsgs().ok().and_then(|mut messages| {
            messages.find_map(|m| match m {
                ControlMessageOwned::ScmTimestampns(ts) => {
                    let secs = u64::try_from(ts.tv_sec()).ok()?;
                    let nanos = u64::try_from(ts.tv_nsec()).ok()?;
                    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
                }
                _ => None,
            })
        });
        Ok((message.bytes, stamp))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;
    use tokio::net::TcpListener;

    use super::*;

    #[test]
    fn a_stamp_from_the_future_or_long_ago_has_no_age() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64;
        assert_eq!(age(now + 5_000_000_000), None);
        assert_eq!(age(now - 3_600_000_000_000), None);
        assert!(age(now - 1_000_000).is_some_and(|a| a >= Duration::from_millis(1)));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn bytes_that_waited_in_the_socket_are_stamped_with_their_arrival() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        enable(&client);
        let (mut server, _) = listener.accept().await.expect("accept");
        let (mut data, mut control) = (vec![0; 64], control_buffer());
        // Enabling timestamps flips a kernel-wide switch asynchronously (`net_enable_timestamp` defers it to a
        // work queue), so the first packets after the first socket asks for stamps may come without one, and the
        // engine then falls back to the read time. Wait until packets are stamped before measuring.
        for attempt in 0.. {
            server.write_all(b"w").await.expect("write");
            client.readable().await.expect("readable");
            let (_, stamp) = read(&client, &mut data, &mut control).expect("the byte arrived");
            if stamp.is_some() {
                break;
            }
            assert!(attempt < 100, "the kernel never stamped a packet");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        server.write_all(b"data: x\n\n").await.expect("write");
        tokio::time::sleep(Duration::from_millis(30)).await;
        client.readable().await.expect("readable");
        let (n, stamp) = read(&client, &mut data, &mut control).expect("bytes were waiting");
        assert_eq!(n, 9);
        let age = age(stamp.expect("Linux stamps what arrives")).expect("a plausible stamp");
        assert!(
            age >= Duration::from_millis(25),
            "stamped {age:?} before the read: at the read, not at arrival"
        );
    }
}

//! A lean HTTP/1.1 client for plain `http://` endpoints: the engine's request path.
//!
//! hyper (under reqwest) runs every connection in a task of its own and passes body chunks to the request over a
//! channel, so each streamed token costs two task wake-ups, and each connection holds 8 KiB read and write
//! buffers. At 10 000 slow streams those buffers are most of the launcher's memory; at 1 000 req/s × 32 tokens the
//! extra wake-ups are most of its CPU and its latency tail. Here the request's own task owns its socket: it writes
//! the request, and each time the socket is readable it reads into a per-thread scratch buffer and hands the bytes
//! straight to the body decoder and the caller — one wake-up per network read, and nothing kept per stream but
//! the decoder's state and whatever line the caller has not finished.
//!
//! Arrival times come from the kernel where it gives them (Linux `SO_TIMESTAMPNS`): the time the bytes reached
//! the socket, not the time this process got around to reading them, so a busy launcher does not add its own
//! scheduling delay to the latencies it reports. Where the kernel gives none, the time the read returned is used.
//!
//! It speaks what an OpenAI-compatible server answers: one request at a time per connection (no pipelining),
//! keep-alive reuse from an idle pool, bodies framed by `Content-Length`, `chunked` or the connection's close.
//! TLS and proxies stay with reqwest (the engine picks: see `client::Transport`).
//!
//! A server may be broken or hostile, and no answer of its may hang a request or grow memory without bound:
//! a body its head frames as empty ends at once; heads over 64 KiB and more than [`MAX_INFORMATIONAL_HEADS`]
//! 1xx heads are refused; chunked framing is decoded as it streams, never buffered, and any fault in it is
//! named; an idle connection on which anything arrived is not reused. How long a request may wait is the
//! caller's timeout (`client::execute`), and how much body it keeps is the caller's cap.

use std::io;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::client::Clock;
use llmbench_model::record::{ErrorClass, RequestError};
use llmbench_model::rx_stamp;

/// Why an endpoint cannot be served by this client; the run reports it before any request is sent.
#[derive(Debug, thiserror::Error)]
pub enum Http1Error {
    #[error("endpoint {url} is not a valid URL: {reason}")]
    Url { url: String, reason: String },
    #[error("endpoint {url} is not plain http:// (TLS goes through the other client)")]
    NotPlainHttp { url: String },
    #[error(
        "the endpoint URL for {host} carries credentials; give an API key in the profile instead"
    )]
    CredentialsInUrl { host: String },
    #[error(
        "header {name:?} has a name or value that cannot go on the wire (control characters or an empty name)"
    )]
    BadHeader { name: String },
}

/// Response heads larger than this are refused: an OpenAI server sends a few hundred bytes.
const MAX_HEAD: usize = 64 * 1024;
/// Informational (1xx) heads accepted before the final one. A server sends one or two (`103 Early Hints`); an
/// endless run of them would keep a request waiting on heads that never end, so more than this is a failure.
pub(crate) const MAX_INFORMATIONAL_HEADS: usize = 16;
/// One non-blocking read into the thread's scratch buffer: `Ok(None)` when nothing was ready, else what `with`
/// made of the bytes (none at the end of the stream) and their arrival time on `clock`: the kernel's stamp where
/// it gave one, else now.
fn read_stamped<R>(
    stream: &TcpStream,
    clock: &Clock,
    with: impl FnOnce(&[u8], u64) -> R,
) -> io::Result<Option<R>> {
    let read = rx_stamp::read_scratch(stream, rx_stamp::SCRATCH, |bytes, stamp| {
        let now_ns = clock.now_ns();
        let age_ns = stamp
            .and_then(rx_stamp::age)
            .map_or(0, |age| u64::try_from(age.as_nanos()).unwrap_or(u64::MAX));
        with(bytes, now_ns.saturating_sub(age_ns))
    });
    match read {
        Ok(made) => Ok(Some(made)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

const CONTENT_LENGTH: &[u8] = b"Content-Length: ";

/// A header of one request, its value as bytes (a `traceparent` is written into a buffer, not a string).
pub(crate) type RequestHeader<'a> = Option<(&'a str, &'a [u8])>;

/// The bytes of one request: the shared head, the request's own headers (`header`, then `more`) before its
/// `Content-Length` (which `head_prefix` ends with), the length and the body. Pure.
fn wire(
    head_prefix: &[u8],
    header: Option<&(String, String)>,
    more: &[RequestHeader<'_>],
    body: &[u8],
) -> Vec<u8> {
    let length = body.len().to_string();
    let own = header
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .into_iter()
        .chain(more.iter().flatten().copied());
    let extra: usize = own.clone().map(|(n, v)| n.len() + v.len() + 4).sum();
    let mut wire = Vec::with_capacity(head_prefix.len() + extra + length.len() + 4 + body.len());
    if extra == 0 {
        wire.extend_from_slice(head_prefix);
    } else {
        let shared = head_prefix
            .strip_suffix(CONTENT_LENGTH)
            .unwrap_or(head_prefix);
        wire.extend_from_slice(shared);
        for (name, value) in own {
            wire.extend_from_slice(name.as_bytes());
            wire.extend_from_slice(b": ");
            wire.extend_from_slice(value);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(CONTENT_LENGTH);
    }
    wire.extend_from_slice(length.as_bytes());
    wire.extend_from_slice(b"\r\n\r\n");
    wire.extend_from_slice(body);
    wire
}

/// One `http://` endpoint: where to connect, the request head every request shares, and the idle connections.
#[derive(Debug)]
pub struct Http1Endpoint {
    /// `host:port` as `TcpStream::connect` resolves it (IPv6 in brackets).
    authority: String,
    /// Request line and fixed headers, up to the `Content-Length` value.
    head_prefix: Vec<u8>,
    idle: Mutex<Vec<TcpStream>>,
    max_idle: usize,
}

impl Http1Endpoint {
    /// `url` is the full request URL (`http://host:port/v1/completions`); `headers` go on every request.
    pub fn new(
        url: &str,
        headers: &[(String, String)],
        max_idle: usize,
    ) -> Result<Self, Http1Error> {
        let parsed = reqwest::Url::parse(url).map_err(|error| Http1Error::Url {
            url: url.to_owned(),
            reason: error.to_string(),
        })?;
        let host = match (parsed.scheme(), parsed.host_str()) {
            ("http", Some(host)) => host,
            _ => {
                return Err(Http1Error::NotPlainHttp {
                    url: url.to_owned(),
                });
            }
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(Http1Error::CredentialsInUrl {
                host: host.to_owned(),
            });
        }
        let port = parsed.port_or_known_default().unwrap_or(80);
        let authority = format!("{host}:{port}");
        let host_header = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let mut target = parsed.path().to_owned();
        if let Some(query) = parsed.query() {
            target.push('?');
            target.push_str(query);
        }
        let mut head = format!("POST {target} HTTP/1.1\r\nHost: {host_header}\r\n");
        let mut has_content_type = false;
        for (name, value) in headers {
            let bad = |b: &u8| b.is_ascii_control() && *b != b'\t';
            if name.is_empty()
                || name.bytes().any(|b| bad(&b) || b == b':' || b == b' ')
                || value.bytes().any(|b| bad(&b))
            {
                return Err(Http1Error::BadHeader { name: name.clone() });
            }
            // Framing is ours to set; a profile's header must not contradict it.
            if name.eq_ignore_ascii_case("content-length")
                || name.eq_ignore_ascii_case("transfer-encoding")
                || name.eq_ignore_ascii_case("host")
            {
                continue;
            }
            has_content_type |= name.eq_ignore_ascii_case("content-type");
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !has_content_type {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str("Content-Length: ");
        Ok(Self {
            authority,
            head_prefix: head.into_bytes(),
            idle: Mutex::new(Vec::new()),
            max_idle,
        })
    }

    /// Sends a POST with `body` and the request's own headers (`header`, then `more`), and waits for the response
    /// head; `written` is told once the whole request was written to a connection. A kept-alive connection the
    /// server has closed meanwhile (no byte of a response on it) is retried once on a fresh connection, as
    /// browsers and hyper do.
    pub async fn send(
        &self,
        body: &[u8],
        header: Option<&(String, String)>,
        more: &[RequestHeader<'_>],
        clock: &Clock,
        mut written: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> Result<Response<'_>, RequestError> {
        let wire = wire(&self.head_prefix, header, more, body);
        loop {
            let pooled = self.take_idle();
            let reused = pooled.is_some();
            let mut stream = match pooled {
                Some(stream) => stream,
                None => self.connect().await?,
            };
            let attempt = match stream.write_all(&wire).await {
                Ok(()) => {
                    if let Some(written) = written.take() {
                        // The receiver is gone only when nobody waits for it.
                        let _ = written.send(());
                    }
                    read_head(&stream, clock).await
                }
                Err(error) => Err(HeadError::Io(error)),
            };
            match attempt {
                Ok(head) => {
                    return Ok(Response {
                        endpoint: self,
                        stream,
                        status: head.status,
                        keep_alive: head.keep_alive,
                        framing: head.framing,
                        early: head.early,
                        early_at_ns: head.at_ns,
                    });
                }
                Err(error) if reused && error.before_any_byte() => continue,
                Err(error) => return Err(error.into_request_error()),
            }
        }
    }

    async fn connect(&self) -> Result<TcpStream, RequestError> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .map_err(|error| RequestError {
                class: ErrorClass::Connect,
                message: format!("cannot connect to {}: {error}", self.authority),
            })?;
        // Requests are small and latency is what we measure: send at once.
        let _ = stream.set_nodelay(true);
        rx_stamp::enable(&stream);
        Ok(stream)
    }

    /// The most recently used idle connection that can still carry a request; the others met on the way are
    /// closed.
    fn take_idle(&self) -> Option<TcpStream> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(stream) = idle.pop() {
            if is_quiet(&stream) {
                return Some(stream);
            }
        }
        None
    }

    fn recycle(&self, stream: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(stream);
        }
    }
}

/// Whether nothing has arrived on an idle connection since its last response ended. Bytes there are a server's
/// stray extra (a body longer than its `Content-Length`), and an end of stream is a server that closed the
/// connection; either would be read as the next request's response head.
fn is_quiet(stream: &TcpStream) -> bool {
    let mut probe = [0_u8; 1];
    matches!(stream.try_read(&mut probe), Err(error) if error.kind() == io::ErrorKind::WouldBlock)
}

/// What the caller wants after a piece of body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    /// The caller has what it needs (an SSE stream's `[DONE]`); the rest of the body is not delivered.
    Stop,
}

/// How a body read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// The body's framing ended (or the connection closed a close-delimited body).
    Complete,
    /// The caller stopped.
    Stopped,
}

/// Decodes `input`. `Some((end, clean))` once the body ended or the caller stopped; `clean` when the framing
/// ended exactly at the end of what was read, so the connection can carry another request.
fn deliver(
    framing: &mut Framing,
    input: &[u8],
    at_ns: u64,
    on_data: &mut impl FnMut(&[u8], u64) -> Result<Flow, RequestError>,
) -> Result<Option<(BodyEnd, bool)>, BodyError> {
    let mut caller_error = None;
    let mut stopped = false;
    // After a stop the rest of the read is still decoded (not delivered), to see whether the body ended in it.
    let consumed = framing.decode(input, |data| {
        if stopped || caller_error.is_some() {
            return;
        }
        match on_data(data, at_ns) {
            Ok(Flow::More) => {}
            Ok(Flow::Stop) => stopped = true,
            Err(error) => caller_error = Some(error),
        }
    })?;
    if let Some(error) = caller_error {
        return Err(BodyError::Caller(error));
    }
    let complete = framing.is_complete();
    let clean = complete && consumed == input.len();
    Ok(match (complete, stopped) {
        (_, true) => Some((BodyEnd::Stopped, clean)),
        (true, false) => Some((BodyEnd::Complete, clean)),
        (false, false) => None,
    })
}

/// Why a body read failed.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// The caller's own error, returned as it was.
    Caller(RequestError),
    /// The connection ended or failed before the body did, or its framing was broken.
    Cut(String),
}

/// A response whose head has arrived; its body is read with [`Response::read_body`].
#[derive(Debug)]
pub struct Response<'a> {
    endpoint: &'a Http1Endpoint,
    stream: TcpStream,
    status: u16,
    keep_alive: bool,
    framing: Framing,
    /// Body bytes that arrived with the head.
    early: Vec<u8>,
    early_at_ns: u64,
}

impl Response<'_> {
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Reads the body, giving `on_data` each decoded piece with the time its read returned (nanoseconds on
    /// `clock`). A connection whose body ended cleanly goes back to the idle pool.
    pub(crate) async fn read_body(
        mut self,
        clock: &Clock,
        mut on_data: impl FnMut(&[u8], u64) -> Result<Flow, RequestError>,
    ) -> Result<BodyEnd, BodyError> {
        let early = std::mem::take(&mut self.early);
        let mut ended = if early.is_empty() {
            // A body the head framed as empty (`Content-Length: 0`, a 204 or 304) has already ended: reading on
            // would wait for bytes that never come, until the request's timeout.
            self.framing
                .is_complete()
                .then_some((BodyEnd::Complete, true))
        } else {
            deliver(&mut self.framing, &early, self.early_at_ns, &mut on_data)?
        };
        drop(early);
        while ended.is_none() {
            self.stream
                .readable()
                .await
                .map_err(|e| BodyError::Cut(e.to_string()))?;
            let framing = &mut self.framing;
            let read = read_stamped(&self.stream, clock, |bytes, at_ns| {
                if bytes.is_empty() {
                    framing.at_eof().map(|end| Some((end, false)))
                } else {
                    deliver(framing, bytes, at_ns, &mut on_data)
                }
            });
            ended = match read {
                Ok(Some(delivered)) => delivered?,
                Ok(None) => None,
                Err(e) => return Err(BodyError::Cut(e.to_string())),
            };
        }
        let (end, clean) = ended.unwrap_or((BodyEnd::Complete, false));
        if clean && self.keep_alive {
            self.endpoint.recycle(self.stream);
        }
        Ok(end)
    }

    /// Reads at most `limit` bytes of the body (an error status's message) for at most `wait`, whatever happens
    /// to the connection: the status is the answer, and a server that stalls in its error body must not turn it
    /// into a timeout.
    pub(crate) async fn read_prefix(self, clock: &Clock, limit: usize, wait: Duration) -> Vec<u8> {
        let mut body = Vec::new();
        let read = self.read_body(clock, |data, _| {
            let room = limit.saturating_sub(body.len());
            body.extend_from_slice(&data[..data.len().min(room)]);
            Ok(if body.len() >= limit {
                Flow::Stop
            } else {
                Flow::More
            })
        });
        let _ = tokio::time::timeout(wait, read).await;
        body
    }
}

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Framing {
    /// `Content-Length`: this many bytes are still to come.
    Length(u64),
    Chunked(ChunkedDecoder),
    /// Neither: the body ends when the server closes the connection.
    UntilClose {
        ended: bool,
    },
}

impl Framing {
    /// Decodes the body bytes in `input`, giving each piece of payload to `on_data`; returns how many bytes of
    /// `input` belonged to the body (the rest would be a second response, which a server must not send).
    fn decode(&mut self, input: &[u8], mut on_data: impl FnMut(&[u8])) -> Result<usize, BodyError> {
        match self {
            Framing::Length(remaining) => {
                let take = input
                    .len()
                    .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                if take > 0 {
                    on_data(&input[..take]);
                }
                *remaining -= take as u64;
                Ok(take)
            }
            Framing::Chunked(decoder) => decoder
                .decode(input, on_data)
                .map_err(|reason| BodyError::Cut(format!("invalid chunked encoding: {reason}"))),
            Framing::UntilClose { .. } => {
                on_data(input);
                Ok(input.len())
            }
        }
    }

    fn is_complete(&self) -> bool {
        match self {
            Framing::Length(remaining) => *remaining == 0,
            Framing::Chunked(decoder) => decoder.is_done(),
            Framing::UntilClose { ended } => *ended,
        }
    }

    /// The connection closed: the end of a close-delimited body, a cut for any other.
    fn at_eof(&mut self) -> Result<BodyEnd, BodyError> {
        match self {
            Framing::UntilClose { ended } => {
                *ended = true;
                Ok(BodyEnd::Complete)
            }
            Framing::Length(remaining) => Err(BodyError::Cut(format!(
                "connection closed with {remaining} byte(s) of the body still to come"
            ))),
            Framing::Chunked(_) => Err(BodyError::Cut(
                "connection closed before the chunked body ended".to_owned(),
            )),
        }
    }
}

/// Incremental `Transfer-Encoding: chunked` decoding: network reads split the framing anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ChunkedDecoder {
    state: ChunkState,
    size: u64,
    size_digits: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ChunkState {
    /// Reading the hex size of the next chunk.
    #[default]
    Size,
    /// Skipping a chunk extension (`;name=value`) up to the line end.
    Extension,
    /// Expecting the LF that ends the size line.
    SizeLf,
    /// Inside a chunk's data; `size` bytes remain.
    Data,
    /// Expecting the CRLF after a chunk's data.
    DataCr,
    DataLf,
    /// At the start of a trailer line (after the last, empty chunk).
    TrailerStart,
    /// Inside a trailer field, skipped.
    Trailer,
    /// Expecting the LF of the final empty line.
    EndLf,
    Done,
}

impl ChunkedDecoder {
    fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    fn decode(&mut self, input: &[u8], mut on_data: impl FnMut(&[u8])) -> Result<usize, String> {
        let mut at = 0;
        while at < input.len() && self.state != ChunkState::Done {
            let byte = input[at];
            match self.state {
                ChunkState::Size => match byte {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        if self.size_digits == 15 {
                            return Err("chunk size has more than 15 hex digits".to_owned());
                        }
                        let digit = (byte as char).to_digit(16).unwrap_or(0);
                        self.size = self.size * 16 + u64::from(digit);
                        self.size_digits += 1;
                    }
                    b';' | b' ' | b'\t' if self.size_digits > 0 => {
                        self.state = ChunkState::Extension
                    }
                    b'\r' if self.size_digits > 0 => self.state = ChunkState::SizeLf,
                    b'\n' if self.size_digits > 0 => self.end_size_line(),
                    _ => return Err(format!("invalid byte {byte:#04x} in a chunk size line")),
                },
                ChunkState::Extension => match byte {
                    b'\r' => self.state = ChunkState::SizeLf,
                    b'\n' => self.end_size_line(),
                    _ => {}
                },
                ChunkState::SizeLf => {
                    if byte != b'\n' {
                        return Err("chunk size line not ended by CRLF".to_owned());
                    }
                    self.end_size_line();
                }
                ChunkState::Data => {
                    let take =
                        (input.len() - at).min(usize::try_from(self.size).unwrap_or(usize::MAX));
                    on_data(&input[at..at + take]);
                    self.size -= take as u64;
                    at += take;
                    if self.size == 0 {
                        self.state = ChunkState::DataCr;
                    }
                    continue;
                }
                ChunkState::DataCr => match byte {
                    b'\r' => self.state = ChunkState::DataLf,
                    b'\n' => self.state = ChunkState::Size,
                    _ => return Err("chunk data not followed by CRLF".to_owned()),
                },
                ChunkState::DataLf => {
                    if byte != b'\n' {
                        return Err("chunk data not followed by CRLF".to_owned());
                    }
                    self.state = ChunkState::Size;
                }
                ChunkState::TrailerStart => match byte {
                    b'\r' => self.state = ChunkState::EndLf,
                    b'\n' => self.state = ChunkState::Done,
                    _ => self.state = ChunkState::Trailer,
                },
                ChunkState::Trailer => {
                    if byte == b'\n' {
                        self.state = ChunkState::TrailerStart;
                    }
                }
                ChunkState::EndLf => {
                    if byte != b'\n' {
                        return Err("chunked body not ended by an empty line".to_owned());
                    }
                    self.state = ChunkState::Done;
                }
                ChunkState::Done => break,
            }
            at += 1;
        }
        Ok(at)
    }

    fn end_size_line(&mut self) {
        self.state = if self.size == 0 {
            ChunkState::TrailerStart
        } else {
            ChunkState::Data
        };
        self.size_digits = 0;
    }
}

/// A parsed response head.
#[derive(Debug)]
struct Head {
    status: u16,
    keep_alive: bool,
    framing: Framing,
    early: Vec<u8>,
    at_ns: u64,
}

/// Why no response head arrived.
#[derive(Debug)]
enum HeadError {
    Io(io::Error),
    /// The server closed the connection after `received` bytes of a head.
    Closed {
        received: usize,
    },
    Malformed(String),
}

impl HeadError {
    /// A kept-alive connection the server had already closed fails this way; the request never reached it.
    fn before_any_byte(&self) -> bool {
        match self {
            HeadError::Closed { received } => *received == 0,
            HeadError::Io(error) => is_reset(error.kind()),
            HeadError::Malformed(_) => false,
        }
    }

    fn into_request_error(self) -> RequestError {
        match self {
            HeadError::Io(error) => {
                let class =
                    if is_reset(error.kind()) || error.kind() == io::ErrorKind::UnexpectedEof {
                        ErrorClass::ConnectionReset
                    } else {
                        ErrorClass::Other
                    };
                RequestError {
                    class,
                    message: format!("connection failed before a response: {error}"),
                }
            }
            HeadError::Closed { received } => RequestError {
                class: ErrorClass::ConnectionReset,
                message: format!(
                    "connection closed before the response head was complete ({received} byte(s) received)"
                ),
            },
            HeadError::Malformed(message) => RequestError {
                class: ErrorClass::Other,
                message: format!("malformed HTTP response: {message}"),
            },
        }
    }
}

/// The ways a write or read fails on a connection the peer has closed.
fn is_reset(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// Reads until a final (non-1xx) response head is complete; body bytes read with it are kept.
async fn read_head(stream: &TcpStream, clock: &Clock) -> Result<Head, HeadError> {
    let mut buffer: Vec<u8> = Vec::new();
    let mut informational = 0;
    loop {
        stream.readable().await.map_err(HeadError::Io)?;
        let read = read_stamped(stream, clock, |bytes, at_ns| {
            buffer.extend_from_slice(bytes);
            (bytes.len(), at_ns)
        });
        let at_ns = match read.map_err(HeadError::Io)? {
            Some((0, _)) => {
                return Err(HeadError::Closed {
                    received: buffer.len(),
                });
            }
            Some((_, at_ns)) => at_ns,
            None => continue,
        };
        while let Some((head, length)) = parse_head(&buffer)? {
            if (100..200).contains(&head.status) {
                // An informational head (103 Early Hints, …): the real one follows.
                informational += 1;
                if informational > MAX_INFORMATIONAL_HEADS {
                    return Err(HeadError::Malformed(format!(
                        "more than {MAX_INFORMATIONAL_HEADS} informational (1xx) heads before the final one"
                    )));
                }
                buffer.drain(..length);
                continue;
            }
            buffer.drain(..length);
            return Ok(Head {
                early: buffer,
                at_ns,
                ..head
            });
        }
        if buffer.len() > MAX_HEAD {
            return Err(HeadError::Malformed(format!(
                "response head larger than {MAX_HEAD} bytes"
            )));
        }
    }
}

/// Parses a complete head at the start of `buffer`: the head and its length, or `None` while it is partial.
fn parse_head(buffer: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let length = match response.parse(buffer) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(HeadError::Malformed(error.to_string())),
    };
    let status = response.code.unwrap_or(0);
    let mut keep_alive = response.version == Some(1);
    let mut content_length = None;
    let mut chunked = None;
    for header in response.headers.iter() {
        let value = String::from_utf8_lossy(header.value);
        if header.name.eq_ignore_ascii_case("content-length") {
            let parsed = value
                .trim()
                .parse::<u64>()
                .map_err(|_| HeadError::Malformed(format!("invalid Content-Length {value:?}")))?;
            if content_length.is_some_and(|known| known != parsed) {
                return Err(HeadError::Malformed(
                    "conflicting Content-Length headers".to_owned(),
                ));
            }
            content_length = Some(parsed);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            // Only the last coding decides: chunked must be last when present at all.
            let last = value
                .rsplit(',')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            chunked = Some(last.eq_ignore_ascii_case("chunked"));
        } else if header.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',') {
                let token = token.trim();
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && response.version == Some(0) {
                    keep_alive = true;
                }
            }
        }
    }
    let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
        Framing::Length(0)
    } else {
        match (chunked, content_length) {
            (Some(true), _) => Framing::Chunked(ChunkedDecoder::default()),
            (Some(false), _) => Framing::UntilClose { ended: false },
            (None, Some(length)) => Framing::Length(length),
            (None, None) => Framing::UntilClose { ended: false },
        }
    };
    if matches!(framing, Framing::UntilClose { .. }) {
        keep_alive = false;
    }
    Ok(Some((
        Head {
            status,
            keep_alive,
            framing,
            early: Vec::new(),
            at_ns: 0,
        },
        length,
    )))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;

    const CHUNKED: &[u8] = b"5\r\nhello\r\n6;name=value\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n";

    fn decode_all(decoder: &mut ChunkedDecoder, input: &[u8], out: &mut Vec<u8>) -> usize {
        decoder
            .decode(input, |data| out.extend_from_slice(data))
            .expect("valid chunked framing")
    }

    #[test]
    fn chunked_bodies_decode_the_same_however_reads_split_them() {
        for split in 0..=CHUNKED.len() {
            let mut decoder = ChunkedDecoder::default();
            let mut out = Vec::new();
            let first = decode_all(&mut decoder, &CHUNKED[..split], &mut out);
            assert_eq!(first, split, "split at {split}");
            let second = decode_all(&mut decoder, &CHUNKED[split..], &mut out);
            assert_eq!(first + second, CHUNKED.len());
            assert_eq!(out, b"hello world", "split at {split}");
            assert!(decoder.is_done());
        }
    }

    #[test]
    fn bytes_after_the_last_chunk_are_not_consumed() {
        let mut decoder = ChunkedDecoder::default();
        let mut input = b"3\r\nabc\r\n0\r\n\r\n".to_vec();
        let body = input.len();
        input.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        assert_eq!(decode_all(&mut decoder, &input, &mut Vec::new()), body);
    }

    #[test]
    fn a_broken_chunk_size_names_the_byte() {
        let mut decoder = ChunkedDecoder::default();
        let error = decoder.decode(b"zz\r\n", |_| {}).expect_err("not hex");
        assert!(error.contains("0x7a"), "{error}");
        let mut decoder = ChunkedDecoder::default();
        let error = decoder
            .decode(b"3\r\nabcX", |_| {})
            .expect_err("no CRLF after data");
        assert!(error.contains("CRLF"), "{error}");
    }

    /// A loopback server answering each request it reads with the next canned response; a response marked
    /// `close` is followed by closing the connection. Returns its URL and how many connections it accepted.
    async fn serve(responses: Vec<(&'static [u8], bool)>) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "http://{}/v1/completions",
            listener.local_addr().expect("addr")
        );
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            let mut responses = responses.into_iter();
            'connections: loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = socket.set_nodelay(true);
                loop {
                    let mut request = Vec::new();
                    let mut buf = [0_u8; 4096];
                    // Head, then Content-Length bytes of body.
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => continue 'connections,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&request).to_string();
                    let head_end = text.find("\r\n\r\n").unwrap_or(0) + 4;
                    let length: usize = text
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while request.len() < head_end + length {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => continue 'connections,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let Some((response, close)) = responses.next() else {
                        return;
                    };
                    // Byte by byte for the first few, so every parser state meets a read boundary.
                    for (i, byte) in response.iter().enumerate() {
                        if i < 40 {
                            let _ = socket.write_all(&[*byte]).await;
                            let _ = socket.flush().await;
                        } else {
                            let _ = socket.write_all(&response[i..]).await;
                            break;
                        }
                    }
                    if close {
                        continue 'connections;
                    }
                }
            }
        });
        (url, accepted)
    }

    async fn body_of(endpoint: &Http1Endpoint, clock: &Clock) -> (u16, Vec<u8>, BodyEnd) {
        let response = endpoint
            .send(b"{}", None, &[], clock, None)
            .await
            .expect("response");
        let status = response.status();
        let mut body = Vec::new();
        let end = response
            .read_body(clock, |data, _| {
                body.extend_from_slice(data);
                Ok(Flow::More)
            })
            .await
            .expect("body");
        (status, body, end)
    }

    const SSE: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
        f\r\ndata: {\"a\":1}\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";

    #[tokio::test]
    async fn a_kept_alive_connection_carries_the_next_request() {
        let (url, accepted) = serve(vec![(SSE, false), (SSE, false)]).await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        for _ in 0..2 {
            let (status, body, end) = body_of(&endpoint, &clock).await;
            assert_eq!(status, 200);
            assert_eq!(body, b"data: {\"a\":1}\n\ndata: [DONE]\n\n");
            assert_eq!(end, BodyEnd::Complete);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_pooled_connection_the_server_closed_is_retried_on_a_fresh_one() {
        // The first answer keeps the connection by its headers, but the server then closes it.
        let (url, accepted) = serve(vec![(SSE, true), (SSE, false)]).await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        body_of(&endpoint, &clock).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let (status, _, _) = body_of(&endpoint, &clock).await;
        assert_eq!(status, 200);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn content_length_and_close_delimited_bodies_end_where_they_should() {
        let (url, accepted) = serve(vec![
            (
                b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nno model!",
                false,
            ),
            (b"HTTP/1.0 200 OK\r\n\r\nuntil the end", true),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false),
        ])
        .await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        assert_eq!(
            body_of(&endpoint, &clock).await,
            (404, b"no model!".to_vec(), BodyEnd::Complete)
        );
        assert_eq!(
            body_of(&endpoint, &clock).await,
            (200, b"until the end".to_vec(), BodyEnd::Complete)
        );
        assert_eq!(
            body_of(&endpoint, &clock).await,
            (200, b"ok".to_vec(), BodyEnd::Complete)
        );
        // The close-delimited answer could not leave its connection for the third request.
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_body_cut_short_is_a_cut_not_a_success() {
        let (url, _) = serve(vec![(
            b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort",
            true,
        )])
        .await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        let response = endpoint
            .send(b"{}", None, &[], &clock, None)
            .await
            .expect("head");
        let error = response
            .read_body(&clock, |_, _| Ok(Flow::More))
            .await
            .expect_err("cut");
        assert!(
            matches!(&error, BodyError::Cut(reason) if reason.contains("95 byte(s)")),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "http://{}/v1/completions",
            listener.local_addr().expect("addr")
        );
        drop(listener);
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let error = endpoint
            .send(b"{}", None, &[], &Clock::start(), None)
            .await
            .expect_err("refused");
        assert_eq!(error.class, ErrorClass::Connect);
    }

    #[test]
    fn endpoints_that_are_not_plain_http_or_have_bad_headers_are_refused() {
        assert!(matches!(
            Http1Endpoint::new("https://example.com/v1/completions", &[], 1),
            Err(Http1Error::NotPlainHttp { .. })
        ));
        assert!(matches!(
            Http1Endpoint::new("http://user:secret@h/v1", &[], 1),
            Err(Http1Error::CredentialsInUrl { .. })
        ));
        assert!(matches!(
            Http1Endpoint::new(
                "http://h/v1",
                &[("X-Bad".to_owned(), "a\r\nInjected: 1".to_owned())],
                1
            ),
            Err(Http1Error::BadHeader { name }) if name == "X-Bad"
        ));
    }

    #[test]
    fn the_request_head_names_the_host_path_and_headers() {
        let endpoint = Http1Endpoint::new(
            "http://[::1]:8000/v1/chat/completions?x=1",
            &[("Authorization".to_owned(), "Bearer k".to_owned())],
            1,
        )
        .expect("endpoint");
        assert_eq!(endpoint.authority, "[::1]:8000");
        assert_eq!(
            String::from_utf8_lossy(&endpoint.head_prefix),
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: [::1]:8000\r\nAuthorization: Bearer k\r\n\
             Content-Type: application/json\r\nContent-Length: "
        );
    }

    #[test]
    fn a_requests_own_header_goes_before_its_content_length() {
        let endpoint =
            Http1Endpoint::new("http://h:1/v1/chat/completions", &[], 1).expect("endpoint");
        let header = ("x-session-id".to_owned(), "trace0_s".to_owned());
        assert_eq!(
            String::from_utf8_lossy(&wire(&endpoint.head_prefix, Some(&header), &[], b"{}")),
            "POST /v1/chat/completions HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\n\
             x-session-id: trace0_s\r\nContent-Length: 2\r\n\r\n{}"
        );
        let ids = [
            Some(("x-request-id", b"llmbench-r-7".as_slice())),
            None,
            Some(("traceparent", b"00-ab-cd-01".as_slice())),
        ];
        assert_eq!(
            String::from_utf8_lossy(&wire(&endpoint.head_prefix, Some(&header), &ids, b"{}")),
            "POST /v1/chat/completions HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\n\
             x-session-id: trace0_s\r\nx-request-id: llmbench-r-7\r\ntraceparent: 00-ab-cd-01\r\n\
             Content-Length: 2\r\n\r\n{}"
        );
        assert_eq!(
            String::from_utf8_lossy(&wire(&endpoint.head_prefix, None, &[None], b"{}")),
            "POST /v1/chat/completions HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\n\
             Content-Length: 2\r\n\r\n{}"
        );
    }

    /// Waits at most a second: an answer that is complete must not wait for the request's timeout.
    async fn promptly<F: std::future::Future>(future: F) -> F::Output {
        tokio::time::timeout(std::time::Duration::from_secs(1), future)
            .await
            .expect("answered without waiting for more bytes")
    }

    #[tokio::test]
    async fn bodies_the_head_frames_as_empty_end_at_once_and_keep_the_connection() {
        let (url, accepted) = serve(vec![
            (b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", false),
            (b"HTTP/1.1 204 No Content\r\n\r\n", false),
            (
                b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\ncontent-length: 12\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\ncontent-length: 0\r\n\r\n",
                false,
            ),
        ])
        .await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        for status in [200, 204, 429, 304, 302] {
            assert_eq!(
                promptly(body_of(&endpoint, &clock)).await,
                (status, Vec::new(), BodyEnd::Complete)
            );
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "one connection carried all five"
        );
    }

    #[tokio::test]
    async fn an_error_body_that_stalls_gives_what_arrived_within_the_wait() {
        let (url, _) = serve(vec![(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 100\r\n\r\noverloaded",
            false,
        )])
        .await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        let response = endpoint
            .send(b"{}", None, &[], &clock, None)
            .await
            .expect("head");
        assert_eq!(response.status(), 503);
        let body = promptly(response.read_prefix(&clock, 2048, Duration::from_millis(200))).await;
        assert_eq!(body, b"overloaded");
    }

    #[tokio::test]
    async fn informational_heads_are_skipped_up_to_the_limit_and_refused_beyond_it() {
        const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
        const FINAL: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        let heads = |count: usize| -> &'static [u8] {
            let mut wire = CONTINUE.repeat(count);
            wire.extend_from_slice(FINAL);
            wire.leak()
        };
        let (url, _) = serve(vec![
            (heads(MAX_INFORMATIONAL_HEADS), true),
            (heads(MAX_INFORMATIONAL_HEADS + 1), true),
        ])
        .await;
        let endpoint = Http1Endpoint::new(&url, &[], 8).expect("endpoint");
        let clock = Clock::start();
        assert_eq!(
            body_of(&endpoint, &clock).await,
            (200, b"ok".to_vec(), BodyEnd::Complete)
        );
        let error = endpoint
            .send(b"{}", None, &[], &clock, None)
            .await
            .expect_err("too many");
        assert_eq!(error.class, ErrorClass::Other);
        assert!(
            error.message.contains("more than 16 informational"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn an_idle_connection_is_quiet_until_the_server_sends_or_closes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        let client = TcpStream::connect(address).await.expect("connect");
        let (mut server, _) = listener.accept().await.expect("accept");
        assert!(is_quiet(&client));
        server.write_all(b"stray").await.expect("write");
        client.readable().await.expect("readable");
        assert!(!is_quiet(&client), "stray bytes make it unusable");

        let client = TcpStream::connect(address).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        drop(server);
        client.readable().await.expect("readable");
        assert!(!is_quiet(&client), "a closed connection is unusable");
    }

    #[test]
    fn chunked_errors_name_the_encoding() {
        let mut framing = Framing::Chunked(ChunkedDecoder::default());
        let error = framing
            .decode(b"5\r\nhelloXX", |_| {})
            .expect_err("no CRLF");
        assert!(
            matches!(&error, BodyError::Cut(reason) if reason.starts_with("invalid chunked encoding: chunk data")),
            "{error:?}"
        );
        let mut framing = Framing::Chunked(ChunkedDecoder::default());
        let error = framing
            .decode(b"1000000000000000\r\n", |_| {})
            .expect_err("overflow");
        assert!(
            matches!(&error, BodyError::Cut(reason) if reason.contains("more than 15 hex digits")),
            "{error:?}"
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        /// Feeds `input` to `decode` in pieces ending at each of `cuts` and then the rest, stopping at the first
        /// error or once the decoder stops consuming; returns the payload, the bytes consumed and any error.
        fn decode_split(
            framing: &mut Framing,
            input: &[u8],
            cuts: &[usize],
        ) -> (Vec<u8>, usize, Option<String>) {
            let mut payload = Vec::new();
            let mut consumed = 0;
            let mut from = 0;
            for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
                let cut = cut.clamp(from, input.len());
                let piece = &input[from..cut];
                match framing.decode(piece, |data| payload.extend_from_slice(data)) {
                    Ok(used) => {
                        assert!(
                            used <= piece.len(),
                            "consumed {used} of {} bytes",
                            piece.len()
                        );
                        consumed += used;
                        if used < piece.len() {
                            break;
                        }
                    }
                    Err(BodyError::Cut(reason)) => return (payload, consumed, Some(reason)),
                    Err(BodyError::Caller(error)) => {
                        return (payload, consumed, Some(error.message));
                    }
                }
                from = cut;
            }
            (payload, consumed, None)
        }

        fn sorted(mut cuts: Vec<usize>) -> Vec<usize> {
            cuts.sort_unstable();
            cuts
        }

        /// A valid chunked body: its encoding and the payload it carries.
        fn chunked_body() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
            let chunk = (
                prop::collection::vec(any::<u8>(), 1..80),
                any::<bool>(),
                prop::option::of("[a-z]{1,6}(=[a-z0-9]{1,6})?"),
            );
            (
                prop::collection::vec(chunk, 0..8),
                prop::collection::vec("[A-Za-z-]{1,10}: [ -~]{0,20}", 0..3),
            )
                .prop_map(|(chunks, trailers)| {
                    let mut wire = Vec::new();
                    let mut payload = Vec::new();
                    for (data, upper, extension) in chunks {
                        let size = if upper {
                            format!("{:X}", data.len())
                        } else {
                            format!("{:x}", data.len())
                        };
                        wire.extend_from_slice(size.as_bytes());
                        if let Some(extension) = extension {
                            wire.extend_from_slice(format!(";{extension}").as_bytes());
                        }
                        wire.extend_from_slice(b"\r\n");
                        wire.extend_from_slice(&data);
                        wire.extend_from_slice(b"\r\n");
                        payload.extend_from_slice(&data);
                    }
                    wire.extend_from_slice(b"0\r\n");
                    for trailer in trailers {
                        wire.extend_from_slice(trailer.as_bytes());
                        wire.extend_from_slice(b"\r\n");
                    }
                    wire.extend_from_slice(b"\r\n");
                    (wire, payload)
                })
        }

        /// A valid response head, and what parsing it must find: status, keep-alive and framing.
        fn response_head() -> impl Strategy<Value = (Vec<u8>, u16, bool, Framing)> {
            (
                0..2_u8,
                100..600_u16,
                prop::option::of(0..1_000_000_u64),
                prop::option::of(prop_oneof![
                    Just("chunked"),
                    Just("gzip, chunked"),
                    Just("gzip"),
                ]),
                prop::option::of(prop_oneof![Just("close"), Just("keep-alive")]),
                prop::collection::vec("x-[a-z]{1,8}: [!-~]{0,16}", 0..6),
            )
                .prop_map(|(minor, status, length, coding, connection, extra)| {
                    let mut head = format!("HTTP/1.{minor} {status} Reason\r\n");
                    for header in &extra {
                        head.push_str(&format!("{header}\r\n"));
                    }
                    if let Some(length) = length {
                        head.push_str(&format!("Content-Length: {length}\r\n"));
                    }
                    if let Some(coding) = coding {
                        head.push_str(&format!("Transfer-Encoding: {coding}\r\n"));
                    }
                    if let Some(connection) = connection {
                        head.push_str(&format!("Connection: {connection}\r\n"));
                    }
                    head.push_str("\r\n");
                    let framing = if status == 204 || status == 304 || status < 200 {
                        Framing::Length(0)
                    } else {
                        match (coding, length) {
                            (Some(coding), _) if coding.ends_with("chunked") => {
                                Framing::Chunked(ChunkedDecoder::default())
                            }
                            (Some(_), _) | (None, None) => Framing::UntilClose { ended: false },
                            (None, Some(length)) => Framing::Length(length),
                        }
                    };
                    let keep_alive = !matches!(framing, Framing::UntilClose { .. })
                        && match connection {
                            Some("close") => false,
                            Some(_) => true,
                            None => minor == 1,
                        };
                    (head.into_bytes(), status, keep_alive, framing)
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn parse_head_never_panics_on_arbitrary_bytes(
                bytes in prop::collection::vec(any::<u8>(), 0..512),
            ) {
                if let Ok(Some((_, length))) = parse_head(&bytes) {
                    prop_assert!(length <= bytes.len());
                }
            }

            #[test]
            fn parse_head_finds_what_a_generated_head_says(
                (head, status, keep_alive, framing) in response_head(),
                body in prop::collection::vec(any::<u8>(), 0..32),
            ) {
                let mut wire = head.clone();
                wire.extend_from_slice(&body);
                let (parsed, length) = parse_head(&wire)
                    .expect("a valid head parses")
                    .expect("a whole head is complete");
                prop_assert_eq!(length, head.len(), "the head ends at its empty line");
                prop_assert_eq!(parsed.status, status);
                prop_assert_eq!(parsed.keep_alive, keep_alive);
                prop_assert_eq!(parsed.framing, framing);
                for end in 0..head.len() {
                    prop_assert!(parse_head(&head[..end]).expect("a prefix is no error").is_none());
                }
            }

            #[test]
            fn the_chunked_decoder_never_panics_nor_consumes_more_than_it_was_given(
                bytes in prop::collection::vec(any::<u8>(), 0..512),
                cuts in prop::collection::vec(0..512_usize, 0..6),
            ) {
                let mut framing = Framing::Chunked(ChunkedDecoder::default());
                let (payload, consumed, error) = decode_split(&mut framing, &bytes, &sorted(cuts));
                prop_assert!(consumed <= bytes.len());
                // Payload is never more than the input; without an error, never more than what was consumed.
                prop_assert!(payload.len() <= bytes.len());
                if error.is_none() {
                    prop_assert!(payload.len() <= consumed);
                }
            }

            #[test]
            fn valid_chunked_bodies_decode_identically_under_every_split(
                (wire, payload) in chunked_body(),
                cuts in prop::collection::vec(0..1024_usize, 0..10),
            ) {
                let mut input = wire.clone();
                input.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
                let mut framing = Framing::Chunked(ChunkedDecoder::default());
                let (decoded, consumed, error) = decode_split(&mut framing, &input, &sorted(cuts));
                prop_assert_eq!(error, None);
                prop_assert_eq!(decoded, payload);
                prop_assert_eq!(consumed, wire.len(), "the bytes after the body are left alone");
                prop_assert!(framing.is_complete());
            }

            #[test]
            fn a_content_length_body_ends_exactly_where_its_length_says(
                length in 0..600_u64,
                input in prop::collection::vec(any::<u8>(), 0..800),
                cuts in prop::collection::vec(0..800_usize, 0..6),
            ) {
                let mut framing = Framing::Length(length);
                let expected = input.len().min(usize::try_from(length).unwrap_or(usize::MAX));
                let (payload, consumed, error) = decode_split(&mut framing, &input, &sorted(cuts));
                prop_assert_eq!(error, None);
                prop_assert_eq!(consumed, expected);
                prop_assert_eq!(&payload[..], &input[..expected]);
                prop_assert_eq!(framing.is_complete(), input.len() as u64 >= length);
            }
        }
    }
}

//! The little HTTP/1.1 every server speaks, and the load generator's side
//! of it. A request is read until its blank line (`\r\n\r\n`); its request
//! line and each header line are parsed (method, target, version; `name:
//! value`, with `Connection: close` honoured); the answer is a fixed
//! 13-byte body on a keep-alive connection. `GET /long` first spins
//! [`Handler::long_iters`] of the calibrated work (20 ms of CPU). The Go
//! server (`go/main.go`) does the same steps.

use std::io::{Read, Write};

/// The answer to every well-formed request.
pub const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";
/// The answer's body, for the smoke test.
pub const BODY: &[u8] = b"Hello, world!";
/// The answer to a malformed request (the connection is then closed).
pub const BAD_REQUEST: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// A request's largest head; longer is malformed.
pub const MAX_HEAD: usize = 4096;

/// The load generator's requests (as wrk's, with a couple of headers).
pub fn request(long: bool) -> &'static [u8] {
    if long {
        b"GET /long HTTP/1.1\r\nHost: bench\r\nUser-Agent: green-bench\r\nAccept: */*\r\n\r\n"
    } else {
        b"GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: green-bench\r\nAccept: */*\r\n\r\n"
    }
}

/// What a server needs of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET /long`: spin before answering.
    pub long: bool,
    /// `Connection: close`: close after answering.
    pub close: bool,
}

/// A malformed request.
#[derive(Debug, PartialEq, Eq)]
pub struct Bad;

fn find_blank_line(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Parses the request at the start of `buf`: the request and the bytes it
/// took, `None` if its head is not all there yet.
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, Bad> {
    let Some(end) = find_blank_line(buf) else {
        return if buf.len() >= MAX_HEAD { Err(Bad) } else { Ok(None) };
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| Bad)?;
    let mut lines = head.split("\r\n");
    let mut words = lines.next().ok_or(Bad)?.split(' ');
    let (Some(method), Some(target), Some(version), None) = (words.next(), words.next(), words.next(), words.next()) else {
        return Err(Bad);
    };
    if method.is_empty() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(Bad);
    }
    let mut close = false;
    for line in lines {
        let (name, value) = line.split_once(':').ok_or(Bad)?;
        if name.is_empty() || name.contains(' ') {
            return Err(Bad);
        }
        if name.eq_ignore_ascii_case("connection") && value.trim().eq_ignore_ascii_case("close") {
            close = true;
        }
    }
    Ok(Some((Request { long: target == "/long", close }, end + 4)))
}

/// A connection's unparsed input: requests may come split across reads or
/// several in one (pipelined).
pub struct RequestBuf {
    buf: Box<[u8; MAX_HEAD]>,
    start: usize,
    len: usize,
}

impl Default for RequestBuf {
    fn default() -> Self {
        RequestBuf { buf: Box::new([0; MAX_HEAD]), start: 0, len: 0 }
    }
}

impl RequestBuf {
    /// Where the next read goes (never empty while [`RequestBuf::next`] has
    /// not failed).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.len, 0);
            self.len -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.len..]
    }

    /// `n` bytes were read into [`RequestBuf::spare`].
    pub fn filled(&mut self, n: usize) {
        self.len += n;
    }

    /// The next whole request, taken out of the buffer.
    pub fn next(&mut self) -> Result<Option<Request>, Bad> {
        match parse(&self.buf[self.start..self.len])? {
            Some((r, used)) => {
                self.start += used;
                if self.start == self.len {
                    self.start = 0;
                    self.len = 0;
                }
                Ok(Some(r))
            }
            None => Ok(None),
        }
    }
}

/// The work behind a request.
#[derive(Clone, Copy, Debug)]
pub struct Handler {
    /// Iterations of `bench_util::work` for `GET /long`.
    pub long_iters: u64,
}

impl Handler {
    /// A handler whose long requests spin `long_ms` of CPU on this machine
    /// (calibrated on the calling thread).
    pub fn calibrated(long_ms: f64) -> Handler {
        Handler { long_iters: (bench_util::calibrate() * long_ms * 1000.0) as u64 }
    }

    /// Does the request's work; the bytes to send back.
    pub fn answer(&self, r: &Request) -> &'static [u8] {
        if r.long {
            std::hint::black_box(bench_util::work(self.long_iters));
        }
        RESPONSE
    }
}

/// What a connection does after [`RequestBuf::answer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send what was answered, then read more.
    Read,
    /// Send what was answered, then close (`Connection: close`, or a
    /// malformed request answered with 400).
    Close,
}

impl RequestBuf {
    /// Answers every whole request in the buffer, appending the answers to
    /// `out`: the same work in every Rust server.
    pub fn answer(&mut self, h: &Handler, out: &mut Vec<u8>) -> Next {
        loop {
            match self.next() {
                Ok(Some(r)) => {
                    out.extend_from_slice(h.answer(&r));
                    if r.close {
                        return Next::Close;
                    }
                }
                Ok(None) => return Next::Read,
                Err(Bad) => {
                    out.extend_from_slice(BAD_REQUEST);
                    return Next::Close;
                }
            }
        }
    }
}

/// Serves one connection with blocking calls until the peer closes it
/// (the pthread and green-thread servers).
pub fn serve_blocking<S: Read + Write>(mut s: S, h: &Handler) {
    let mut rb = RequestBuf::default();
    let mut out = Vec::with_capacity(256);
    loop {
        let next = rb.answer(h, &mut out);
        if !out.is_empty() && s.write_all(&out).is_err() {
            return;
        }
        out.clear();
        if next == Next::Close {
            return;
        }
        match s.read(rb.spare()) {
            Ok(0) | Err(_) => return,
            Ok(n) => rb.filled(n),
        }
    }
}

/// The load generator's parse of an answer at the start of `buf`: whether
/// it was a 200 and the bytes it took, `None` if not all there yet.
pub fn parse_response(buf: &[u8]) -> Result<Option<(bool, usize)>, Bad> {
    let Some(end) = find_blank_line(buf) else {
        return if buf.len() >= MAX_HEAD { Err(Bad) } else { Ok(None) };
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| Bad)?;
    let mut lines = head.split("\r\n");
    let ok = lines.next().ok_or(Bad)?.starts_with("HTTP/1.1 200 ");
    let mut length = 0;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().map_err(|_| Bad)?;
            }
        }
    }
    let total = end + 4 + length;
    Ok((buf.len() >= total).then_some((ok, total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_and_pipelined_are_parsed() {
        let mut rb = RequestBuf::default();
        let two = [request(false), request(true)].concat();
        let (a, b) = two.split_at(10);
        rb.spare()[..a.len()].copy_from_slice(a);
        rb.filled(a.len());
        assert_eq!(rb.next(), Ok(None));
        rb.spare()[..b.len()].copy_from_slice(b);
        rb.filled(b.len());
        assert_eq!(rb.next(), Ok(Some(Request { long: false, close: false })));
        assert_eq!(rb.next(), Ok(Some(Request { long: true, close: false })));
        assert_eq!(rb.next(), Ok(None));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nconnection:  Close\r\n\r\n").unwrap().unwrap().0.close, true);
        assert_eq!(parse(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), Err(Bad));
        assert_eq!(parse(b"GET /\r\n\r\n"), Err(Bad));
        assert_eq!(parse(&[b'x'; MAX_HEAD]), Err(Bad));
    }

    #[test]
    fn answers_are_parsed_with_their_body() {
        assert_eq!(parse_response(RESPONSE), Ok(Some((true, RESPONSE.len()))));
        assert_eq!(parse_response(&RESPONSE[..RESPONSE.len() - 1]), Ok(None));
        assert_eq!(parse_response(BAD_REQUEST), Ok(Some((false, BAD_REQUEST.len()))));
    }
}

//! A minimal HTTP/1.1 client over `std::net`, for talking to the HTTP servers
//! tests start (Tally's, the reference graphite-web).
//!
//! It sends exactly the bytes it is given (method, request target, headers,
//! body: a raw, not URL-encoded form body stays raw), one request per
//! connection (`Connection: close`), and reads the whole answer: a body by
//! `Content-Length`, chunked, or up to the end of the stream. That is all a
//! test comparing two servers needs, so the same request can go to Tally and
//! to the reference graphite-web byte for byte. It does no TLS, redirects,
//! compression or keep-alive.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a read may block before the request fails. Generous: the
/// reference servers share two cores with everything else in CI.
const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// An HTTP answer, read in full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code (`200`, `400`, ...).
    pub status: u16,
    /// The header fields in the order the server sent them, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header field called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Content-Type` header, or `""` when there is none.
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request to `addr` and reads the whole answer.
///
/// `target` is the request target as it goes on the request line (a path and
/// query, e.g. `/graphite/render?target=a.b&format=json`). `Host` and
/// `Connection: close` are added; so is `Content-Length` when `body` is not
/// empty or the method is `POST` or `PUT` (do not pass those three in
/// `headers`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<Response> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw)
}

/// Parses a whole HTTP/1.x answer.
fn parse(raw: &[u8]) -> io::Result<Response> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of header in the answer"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("header is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    let mut response = Response {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[end + 4..];
    response.body = if response
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        dechunk(rest).ok_or_else(|| bad("bad chunked body"))?
    } else if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().map_err(|_| bad("bad Content-Length"))?;
        rest.get(..length)
            .ok_or_else(|| bad("body shorter than its Content-Length"))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(response)
}

/// The payload of a chunked body, or `None` if it is cut short or malformed.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_field = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size_hex = size_field.split(';').next()?.trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_body_by_content_length() {
        let r = parse(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!(r.status, 400);
        assert_eq!(r.content_type(), "text/html; charset=utf-8");
        assert_eq!(r.body, b"abc");
    }

    #[test]
    fn parses_a_chunked_body_and_one_up_to_the_end() {
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.body, b"abcde");
        let r = parse(b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n[1, 2]").unwrap();
        assert_eq!(
            (r.status, r.header("SERVER"), r.text().as_str()),
            (200, Some("x"), "[1, 2]")
        );
    }

    #[test]
    fn refuses_a_cut_answer() {
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}

//! A minimal blocking RESP2 client for the harness's own administration
//! commands (CLUSTER, INFO, MIGRATE): tests themselves use a real client.
//!
//! It sends commands as RESP arrays (so arguments may hold spaces or be
//! empty) and reads one whole reply, however long.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and other simple strings.
    Status(String),
    /// `-ERR ...`: the server's error line.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` bulk string; `None` for the null bulk string.
    Bulk(Option<Vec<u8>>),
    /// `*n` array; `None` for the null array.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The reply as text (status or bulk), or `None`.
    pub fn text(&self) -> Option<String> {
        match self {
            Reply::Status(s) => Some(s.clone()),
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The reply as an integer, or `None`.
    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The array's items (empty for anything else).
    pub fn items(&self) -> Vec<Reply> {
        match self {
            Reply::Array(Some(items)) => items.clone(),
            _ => Vec::new(),
        }
    }

    /// True for an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

/// Sends one command to 127.0.0.1:`port` on a fresh connection and reads its
/// reply. I/O failures (the server is down) are errors; error replies are
/// [`Reply::Error`] values.
pub fn command(port: u16, args: &[&str]) -> std::io::Result<Reply> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut out = Vec::new();
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    (&stream).write_all(&out)?;
    let mut reader = BufReader::new(&stream);
    read_reply(&mut reader)
}

fn read_reply(reader: &mut impl BufRead) -> std::io::Result<Reply> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before a reply",
        ));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(1);
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    Ok(match kind {
        "+" => Reply::Status(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(rest.parse().map_err(|_| bad("bad integer reply"))?),
        "$" => {
            let len: i64 = rest.parse().map_err(|_| bad("bad bulk length"))?;
            if len < 0 {
                Reply::Bulk(None)
            } else {
                let mut buf = vec![0u8; len as usize + 2];
                reader.read_exact(&mut buf)?;
                buf.truncate(len as usize);
                Reply::Bulk(Some(buf))
            }
        }
        "*" => {
            let len: i64 = rest.parse().map_err(|_| bad("bad array length"))?;
            if len < 0 {
                Reply::Array(None)
            } else {
                let mut items = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    items.push(read_reply(reader)?);
                }
                Reply::Array(Some(items))
            }
        }
        _ => return Err(bad("unknown RESP type")),
    })
}

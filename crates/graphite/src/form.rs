//! Query strings and form bodies to name/value pairs, tolerant of what Grafana sends: a
//! urlencoded form (`%xx`, `+` for space) and the raw, unencoded `/metrics/find` body
//! (`query=app.{a,b}.*`, braces and commas as they are).
//!
//! Owns decoding, and [`last`]: the value of a parameter whose last pair counts (which
//! parameters those are, and `target`'s every pair, is the reader's rule).

/// Splits `body` on `&`, each part on its first `=`, and decodes `+` and `%xx` as a
/// urlencoded form does; anything else (`{`, `}`, `,`, a `%` not followed by two hex
/// digits, invalid UTF-8) is kept as it is. Empty parts are skipped; a part without `=` is
/// a name with an empty value.
pub fn parse_form(body: &[u8]) -> Vec<(String, String)> {
    body.split(|&b| b == b'&')
        .filter(|part| !part.is_empty())
        .map(|part| match part.iter().position(|&b| b == b'=') {
            Some(eq) => (decode(&part[..eq]), decode(&part[eq + 1..])),
            None => (decode(part), String::new()),
        })
        .collect()
}

fn decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < raw.len() && hex(raw[i + 1]).is_some() && hex(raw[i + 2]).is_some() => {
                out.push(hex(raw[i + 1]).unwrap_or(0) * 16 + hex(raw[i + 2]).unwrap_or(0));
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The last value of a parameter (Django's `QueryDict.__getitem__`).
pub(crate) fn last<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn grafanas_raw_find_body_keeps_braces_and_commas() {
        assert_eq!(
            parse_form(b"query=app.{a,b}.*"),
            pairs(&[("query", "app.{a,b}.*")])
        );
        assert_eq!(
            parse_form(b"query=app.*&from=-6h&until=now"),
            pairs(&[("query", "app.*"), ("from", "-6h"), ("until", "now")])
        );
    }

    #[test]
    fn grafanas_urlencoded_render_body_decodes() {
        // What Grafana 11 posts for a panel (its aliasSub wrapper, epoch times).
        let body = b"target=aliasSub(app.requests%2C%20%22(%5E.*%24)%22%2C%20%22%5C1%20A%22)&from=1700000000&until=1700003600&format=json&maxDataPoints=1234";
        assert_eq!(
            parse_form(body),
            pairs(&[
                ("target", r#"aliasSub(app.requests, "(^.*$)", "\1 A")"#),
                ("from", "1700000000"),
                ("until", "1700003600"),
                ("format", "json"),
                ("maxDataPoints", "1234"),
            ])
        );
        assert_eq!(
            parse_form(b"target=a+b&x"),
            pairs(&[("target", "a b"), ("x", "")])
        );
    }

    #[test]
    fn stray_percent_signs_and_bad_bytes_survive() {
        assert_eq!(
            parse_form(b"q=100%&r=%zz%4"),
            pairs(&[("q", "100%"), ("r", "%zz%4")])
        );
        assert_eq!(parse_form(b"q=%ff"), pairs(&[("q", "\u{fffd}")]));
        assert_eq!(parse_form(b"&&q=%41&"), pairs(&[("q", "A")]));
    }
}

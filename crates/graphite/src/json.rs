//! JSON text exactly as Python's `json.dumps` writes it (graphite-web's answers): `", "` and
//! `": "` separators (or `indent=2` with `","`), `\uXXXX` escapes for non-ASCII when
//! `ensure_ascii`, floats as `repr()`, and `NaN` / `Infinity` / `-Infinity` for the
//! non-finite ones (callers apply graphite-web's textual replacements afterwards).
//!
//! Owns serialization only; the answers' shapes are built by `render` and `find`.

use crate::pyfmt::write_repr_f64;

/// A JSON value in Python's terms (an int is not a float; objects keep their order).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// How to write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    /// `indent=2` (Python's pretty form) instead of one line.
    pub(crate) pretty: bool,
    /// `ensure_ascii=True`: escape every non-ASCII character.
    pub(crate) ascii: bool,
    /// `sort_keys=True`.
    pub(crate) sort_keys: bool,
}

impl Style {
    pub(crate) const DEFAULT: Style = Style {
        pretty: false,
        ascii: true,
        sort_keys: false,
    };
}

impl Json {
    /// A string value.
    pub(crate) fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// Writes the value as `json.dumps` would.
    pub(crate) fn dumps(&self, style: Style) -> String {
        let mut out = String::new();
        self.write(&mut out, style, 0);
        out
    }

    fn write(&self, out: &mut String, style: Style, level: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(true) => out.push_str("true"),
            Json::Bool(false) => out.push_str("false"),
            Json::Int(i) => write_int(out, *i),
            Json::Float(f) => write_float(out, *f),
            Json::Str(s) => write_str(out, s, style.ascii),
            Json::Array(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    separator(out, style, level + 1, i == 0);
                    item.write(out, style, level + 1);
                }
                close(out, style, level);
                out.push(']');
            }
            Json::Object(fields) => {
                if fields.is_empty() {
                    out.push_str("{}");
                    return;
                }
                let mut order: Vec<&(String, Json)> = fields.iter().collect();
                if style.sort_keys {
                    order.sort_by(|a, b| a.0.cmp(&b.0));
                }
                out.push('{');
                for (i, (key, value)) in order.into_iter().enumerate() {
                    separator(out, style, level + 1, i == 0);
                    write_str(out, key, style.ascii);
                    out.push_str(": ");
                    value.write(out, style, level + 1);
                }
                close(out, style, level);
                out.push('}');
            }
        }
    }
}

fn separator(out: &mut String, style: Style, level: usize, first: bool) {
    if style.pretty {
        if !first {
            out.push(',');
        }
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', 2 * level));
    } else if !first {
        out.push_str(", ");
    }
}

fn close(out: &mut String, style: Style, level: usize) {
    if style.pretty {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', 2 * level));
    }
}

/// An int as `json.dumps` writes it.
pub(crate) fn write_int(out: &mut String, i: i64) {
    crate::pyfmt::write_i64(out, i);
}

/// A float as `json.dumps` writes it: `repr`, or `NaN`, `Infinity`, `-Infinity`.
pub(crate) fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        write_repr_f64(out, f);
    }
}

/// A string as `json.dumps` writes it (`ensure_ascii` when `ascii`).
pub(crate) fn write_str(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ascii && (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_form_matches_python() {
        let v = Json::Array(vec![Json::Object(vec![
            ("target".into(), Json::str("a.b")),
            (
                "datapoints".into(),
                Json::Array(vec![
                    Json::Array(vec![Json::Float(1.0), Json::Int(60)]),
                    Json::Array(vec![Json::Null, Json::Int(120)]),
                ]),
            ),
        ])]);
        // json.dumps([{"target": "a.b", "datapoints": [[1.0, 60], [None, 120]]}])
        assert_eq!(
            v.dumps(Style::DEFAULT),
            r#"[{"target": "a.b", "datapoints": [[1.0, 60], [null, 120]]}]"#
        );
    }

    #[test]
    fn pretty_form_matches_python() {
        let v = Json::Object(vec![
            (
                "b".into(),
                Json::Array(vec![Json::Int(1), Json::Array(vec![])]),
            ),
            ("a".into(), Json::Object(vec![])),
        ]);
        let style = Style {
            pretty: true,
            ascii: true,
            sort_keys: true,
        };
        // json.dumps({"b": [1, []], "a": {}}, indent=2, sort_keys=True)
        assert_eq!(
            v.dumps(style),
            "{\n  \"a\": {},\n  \"b\": [\n    1,\n    []\n  ]\n}"
        );
    }

    #[test]
    fn strings_escape_as_python() {
        let s = Json::str("é\"\\\n\u{1}\u{1F600}~\u{7f}");
        // json.dumps('é"\\\n\x01😀~\x7f')
        assert_eq!(
            s.dumps(Style::DEFAULT),
            r#""\u00e9\"\\\n\u0001\ud83d\ude00~\u007f""#
        );
        let raw = Style {
            ascii: false,
            ..Style::DEFAULT
        };
        assert_eq!(Json::str("é\u{7f}").dumps(raw), "\"é\u{7f}\"");
    }

    #[test]
    fn non_finite_floats_are_written_as_python_does() {
        let v = Json::Array(vec![
            Json::Float(f64::NAN),
            Json::Float(f64::INFINITY),
            Json::Float(f64::NEG_INFINITY),
            Json::Float(1e16),
        ]);
        assert_eq!(v.dumps(Style::DEFAULT), "[NaN, Infinity, -Infinity, 1e+16]");
    }
}

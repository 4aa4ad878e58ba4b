//! Python's `re.sub(pattern, replacement, text)` as `aliasSub` uses it, and `re.search` as
//! `exclude` and `grep` use it, on the `regex` crate.
//!
//! Owns the translation of a Python pattern (`\Z`, a literal `{`, `{,n}`) and of a Python
//! replacement template (`\1`, `\g<1>`, `\g<name>`, `\n`-style escapes, octal escapes, a
//! group that did not take part as empty text), and the iteration over matches.
//!
//! What differs from Python, because the `regex` crate has no backtracking: look-around,
//! back-references inside the pattern, atomic groups and possessive quantifiers are refused
//! (a 400); `$` matches only at the very end (Python also matches before a final newline);
//! after an empty match the next match starts one character later (Python may take a
//! longer match at the same position).

use regex::Regex;

use crate::{Error, Result};

/// A compiled `re.sub`.
#[derive(Debug, Clone)]
pub(crate) struct Substitution {
    regex: Regex,
    template: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Group(usize),
}

/// `re.compile(pattern)` for `re.search` (`exclude`, `grep`): a 400 naming the pattern
/// where Python's `re` would refuse it, or where this translation cannot follow it.
pub(crate) fn compile(pattern: &str) -> Result<Regex> {
    let translated = translate_pattern(pattern)?;
    Regex::new(&translated).map_err(|e| {
        Error::invalid(format!(
            "invalid regular expression {}: {}",
            crate::pyfmt::repr_str(pattern),
            e.to_string().lines().last().unwrap_or("")
        ))
    })
}

impl Substitution {
    pub(crate) fn new(pattern: &str, replacement: &str) -> Result<Substitution> {
        let regex = compile(pattern)?;
        let template = parse_template(replacement, &regex)?;
        Ok(Substitution { regex, template })
    }

    /// Replaces every match in `text`.
    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut at = 0;
        let mut locs = self.regex.capture_locations();
        while at <= text.len() {
            let Some(m) = self.regex.captures_read_at(&mut locs, text, at) else {
                break;
            };
            out.push_str(&text[copied..m.start()]);
            for piece in &self.template {
                match piece {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Group(g) => {
                        if let Some((s, e)) = locs.get(*g) {
                            out.push_str(&text[s..e]);
                        }
                    }
                }
            }
            copied = m.end();
            at = if m.end() > m.start() {
                m.end()
            } else {
                // An empty match: the next one starts after the next character.
                match text[m.end()..].chars().next() {
                    Some(c) => m.end() + c.len_utf8(),
                    None => break,
                }
            };
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// Rewrites what Python accepts and the `regex` crate spells differently or refuses.
fn translate_pattern(pattern: &str) -> Result<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    let unsupported = |what: &str| {
        Err(Error::invalid(format!(
            "regular expression {}: {what} is not supported",
            crate::pyfmt::repr_str(pattern)
        )))
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err(Error::invalid(format!(
                        "invalid regular expression {}: bad escape (end of pattern)",
                        crate::pyfmt::repr_str(pattern)
                    )));
                };
                if !in_class && next == 'Z' {
                    out.push_str("\\z");
                } else if !in_class && next.is_ascii_digit() && next != '0' {
                    return unsupported("a back-reference");
                } else {
                    out.push('\\');
                    out.push(next);
                }
                i += 2;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                // A leading `^` and a `]` right after the opening are literal members.
                if chars.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    out.push_str("\\]");
                    i += 1;
                }
                continue;
            }
            '[' if in_class => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '(' if !in_class && chars.get(i + 1) == Some(&'?') => {
                let rest: String = chars[i + 2..chars.len().min(i + 5)].iter().collect();
                if rest.starts_with('=')
                    || rest.starts_with('!')
                    || rest.starts_with("<=")
                    || rest.starts_with("<!")
                {
                    return unsupported("look-around");
                }
                if rest.starts_with('>') {
                    return unsupported("an atomic group");
                }
                if rest.starts_with("P=") {
                    return unsupported("a back-reference");
                }
                if rest.starts_with('#') {
                    // A comment group: dropped.
                    while i < chars.len() && chars[i] != ')' {
                        i += 1;
                    }
                    i += 1;
                    continue;
                }
                out.push('(');
            }
            '{' if !in_class => match quantifier(&chars[i..]) {
                Some((text, len)) => {
                    let prev_is_quantifier = out.ends_with(['*', '+', '?', '}']);
                    if prev_is_quantifier
                        && !out.ends_with("\\}")
                        && chars.get(i + len) == Some(&'+')
                    {
                        return unsupported("a possessive quantifier");
                    }
                    out.push_str(&text);
                    i += len;
                    continue;
                }
                None => out.push_str("\\{"),
            },
            '}' if !in_class => out.push_str("\\}"),
            '+' if !in_class
                && i > 0
                && matches!(chars[i - 1], '*' | '+' | '?')
                && !(i > 1 && chars[i - 2] == '\\') =>
            {
                return unsupported("a possessive quantifier");
            }
            c => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

/// A `{m}`, `{m,}`, `{,n}` or `{m,n}` repetition at the start of `chars`, as the `regex`
/// crate writes it, and its length in the pattern.
fn quantifier(chars: &[char]) -> Option<(String, usize)> {
    let close = chars.iter().position(|&c| c == '}')?;
    let inner: String = chars[1..close].iter().collect();
    let (lo, hi) = match inner.split_once(',') {
        Some((lo, hi)) => (lo, Some(hi)),
        None => (inner.as_str(), None),
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if !digits(lo) || !hi.is_none_or(digits) {
        return None;
    }
    let text = match hi {
        None if lo.is_empty() => return None,
        None => format!("{{{lo}}}"),
        Some(hi) => format!("{{{},{hi}}}", if lo.is_empty() { "0" } else { lo }),
    };
    Some((text, close + 1))
}

/// Python's replacement template (`sre_parse.parse_template`).
fn parse_template(template: &str, regex: &Regex) -> Result<Vec<Piece>> {
    let groups = regex.captures_len();
    let chars: Vec<char> = template.chars().collect();
    let mut pieces = Vec::new();
    let mut text = String::new();
    let bad = |message: String| {
        Err(Error::invalid(format!(
            "invalid replacement {}: {message}",
            crate::pyfmt::repr_str(template)
        )))
    };
    let group = |text: &mut String, pieces: &mut Vec<Piece>, g: usize| {
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(text)));
        }
        pieces.push(Piece::Group(g));
    };
    let octal = |c: char| ('0'..='7').contains(&c);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            text.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = chars.get(i + 1) else {
            return bad("bad escape (end of pattern)".to_owned());
        };
        i += 2;
        match e {
            'g' => {
                if chars.get(i) != Some(&'<') {
                    return bad("missing <".to_owned());
                }
                let Some(close) = chars[i..].iter().position(|&c| c == '>') else {
                    return bad("missing >, unterminated name".to_owned());
                };
                let name: String = chars[i + 1..i + close].iter().collect();
                i += close + 1;
                if name.is_empty() {
                    return bad("missing group name".to_owned());
                }
                let index = if name.chars().all(|c| c.is_ascii_digit()) {
                    name.parse::<usize>().ok()
                } else {
                    regex.capture_names().position(|n| n == Some(name.as_str()))
                };
                match index {
                    Some(g) if g < groups => group(&mut text, &mut pieces, g),
                    Some(g) if name.chars().all(|c| c.is_ascii_digit()) => {
                        return bad(format!("invalid group reference {g}"));
                    }
                    _ => return bad(format!("unknown group name '{name}'")),
                }
            }
            '0' => {
                let mut value = 0u32;
                let mut taken = 0;
                while taken < 2 && chars.get(i).is_some_and(|&c| octal(c)) {
                    value = value * 8 + chars[i].to_digit(8).unwrap_or(0);
                    i += 1;
                    taken += 1;
                }
                text.push(char::from_u32(value & 0xff).unwrap_or('\0'));
            }
            d if d.is_ascii_digit() => {
                let mut digits = String::from(d);
                if chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
                    digits.push(chars[i]);
                    i += 1;
                    if octal(d)
                        && digits.chars().nth(1).is_some_and(octal)
                        && chars.get(i).is_some_and(|&c| octal(c))
                    {
                        digits.push(chars[i]);
                        i += 1;
                        let value = u32::from_str_radix(&digits, 8).unwrap_or(0);
                        if value > 0o377 {
                            return bad(format!(
                                "octal escape value \\{digits} outside of range 0-0o377"
                            ));
                        }
                        text.push(char::from_u32(value).unwrap_or('\0'));
                        continue;
                    }
                }
                let g: usize = digits.parse().unwrap_or(usize::MAX);
                if g >= groups {
                    return bad(format!("invalid group reference {g}"));
                }
                group(&mut text, &mut pieces, g);
            }
            'a' => text.push('\u{7}'),
            'b' => text.push('\u{8}'),
            'f' => text.push('\u{c}'),
            'n' => text.push('\n'),
            'r' => text.push('\r'),
            't' => text.push('\t'),
            'v' => text.push('\u{b}'),
            '\\' => text.push('\\'),
            e if e.is_ascii_alphabetic() => return bad(format!("bad escape \\{e}")),
            e => {
                text.push('\\');
                text.push(e);
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(pattern: &str, replacement: &str, text: &str) -> String {
        Substitution::new(pattern, replacement).unwrap().apply(text)
    }

    #[test]
    fn grafanas_wrapper_appends_the_ref_id() {
        // re.sub("(^.*$)", r"\1 A", "app.requests") == "app.requests A"
        assert_eq!(sub("(^.*$)", "\\1 A", "app.requests"), "app.requests A");
    }

    #[test]
    fn templates_follow_python() {
        // Each expectation is CPython 3.11's re.sub on the same arguments.
        assert_eq!(sub("^.*TCP(\\d+)", "\\1", "ip.TCP80.x"), "80.x");
        assert_eq!(sub("(a)|b", "[\\1]", "ab"), "[a][]");
        assert_eq!(sub("(?P<n>\\w+)\\.(\\w+)", "\\g<2>.\\g<n>", "a.b"), "b.a");
        assert_eq!(sub("a", "\\n\\t\\\\", "a"), "\n\t\\");
        assert_eq!(sub("a", "\\.", "a"), "\\.");
        assert_eq!(sub("a", "\\101\\0", "a"), "A\0");
        assert_eq!(sub("x*", "-", "abxd"), "-a-b--d-");
        assert_eq!(sub("b", "\\g<0>\\g<0>", "abc"), "abbc");
        assert_eq!(sub("a{", "-", "a{"), "-");
        assert_eq!(sub("a{,2}b", "-", "aab"), "-");
        assert_eq!(sub("end\\Z", "E", "the end"), "the E");
    }

    #[test]
    fn python_errors_are_400s() {
        for (p, r) in [
            ("(a)", "\\2"),
            ("a", "\\q"),
            ("(", "x"),
            ("a", "\\g<x>"),
            ("(?=a)", ""),
        ] {
            assert!(
                matches!(Substitution::new(p, r), Err(Error::InvalidParameters(_))),
                "{p} {r}"
            );
        }
    }
}

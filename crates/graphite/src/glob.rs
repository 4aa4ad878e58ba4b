//! A path pattern as graphite-web 1.1.10's standard finder matches it: backslashes dropped,
//! split into dot-separated nodes, each node's braces expanded (`{a,b}`, nested braces as
//! `expand_braces` does) and each variant matched as Python's `fnmatch` matches a file name
//! (`*`, `?`, `[a-z0-9]`, `[!x]`, an unclosed `[` as a literal).
//!
//! Owns pattern parsing and matching of one node or a whole path; it does not list anything
//! (a [`crate::Store`] walks its own namespace, by [`Glob::literal_prefix`] where it can).

use crate::{Error, Result};

/// Brace variants allowed in one node before a pattern is refused.
pub const MAX_VARIANTS: usize = 10_000;

/// A parsed path pattern.
#[derive(Debug, Clone)]
pub struct Glob {
    text: String,
    clean: String,
    nodes: Vec<NodePattern>,
}

impl PartialEq for Glob {
    fn eq(&self, other: &Glob) -> bool {
        self.text == other.text
    }
}

impl Eq for Glob {}

impl std::hash::Hash for Glob {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

#[derive(Debug, Clone)]
enum NodePattern {
    /// No wildcard and no brace: the node's text must be equal.
    Exact(String),
    /// Any of these fnmatch patterns.
    Variants(Vec<Vec<Token>>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(char),
    AnyChar,
    Star,
    Class(Class),
    Never,
}

#[derive(Debug, Clone, PartialEq)]
struct Class {
    negated: bool,
    items: Vec<(char, char)>,
}

impl Class {
    fn matches(&self, c: char) -> bool {
        self.items.iter().any(|&(lo, hi)| lo <= c && c <= hi) != self.negated
    }
}

impl Glob {
    /// Parses a pattern; fails only when a node's braces expand to more than
    /// [`MAX_VARIANTS`] variants.
    pub fn parse(pattern: &str) -> Result<Glob> {
        let clean: String = pattern.chars().filter(|&c| c != '\\').collect();
        let mut nodes = Vec::new();
        for node in clean.split('.') {
            if !node.contains(['*', '?', '[', '{']) {
                nodes.push(NodePattern::Exact(node.to_owned()));
                continue;
            }
            let mut variants = Vec::new();
            expand_braces(node, &mut variants)?;
            variants.sort();
            variants.dedup();
            nodes.push(NodePattern::Variants(
                variants.iter().map(|v| translate(v)).collect(),
            ));
        }
        Ok(Glob {
            text: pattern.to_owned(),
            clean,
            nodes,
        })
    }

    /// The pattern as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The number of nodes.
    pub fn depth(&self) -> usize {
        self.nodes.len()
    }

    /// Whether node `i` of the pattern matches a node's text (false past the last node).
    pub fn node_matches(&self, i: usize, node: &str) -> bool {
        match self.nodes.get(i) {
            None => false,
            Some(NodePattern::Exact(text)) => text == node,
            Some(NodePattern::Variants(variants)) => {
                let chars: Vec<char> = node.chars().collect();
                variants.iter().any(|tokens| fnmatch(tokens, &chars))
            }
        }
    }

    /// Whether a whole dotted path matches, node by node (same depth).
    pub fn matches(&self, path: &str) -> bool {
        let mut count = 0;
        for (i, node) in path.split('.').enumerate() {
            if !self.node_matches(i, node) {
                return false;
            }
            count += 1;
        }
        count == self.nodes.len()
    }

    /// The text before the first wildcard character (`*`, `?`, `[`, `{`), backslashes
    /// dropped: every matching path starts with it.
    pub fn literal_prefix(&self) -> &str {
        let end = self
            .clean
            .find(['*', '?', '[', '{'])
            .unwrap_or(self.clean.len());
        &self.clean[..end]
    }

    /// True when no node holds a wildcard or a brace: the pattern names one path.
    pub fn is_exact(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| matches!(n, NodePattern::Exact(_)))
    }

    /// The node's exact text when node `i` has no wildcard.
    pub fn exact_node(&self, i: usize) -> Option<&str> {
        match self.nodes.get(i) {
            Some(NodePattern::Exact(text)) => Some(text),
            _ => None,
        }
    }
}

/// graphite's `expand_braces`: the leftmost `{...}` holding no brace is split on commas and
/// each alternative expanded again (iteratively here, so that no pattern can exhaust the
/// stack, and refused past [`MAX_VARIANTS`] variants or as many expansion steps).
fn expand_braces(node: &str, out: &mut Vec<String>) -> Result<()> {
    let too_many = || {
        Error::invalid(format!(
            "pattern node expands to more than {MAX_VARIANTS} variants: {node}"
        ))
    };
    let mut pending = vec![node.to_owned()];
    let mut steps = 0usize;
    while let Some(s) = pending.pop() {
        steps += 1;
        if steps > 10 * MAX_VARIANTS || out.len() > MAX_VARIANTS {
            return Err(too_many());
        }
        match innermost_braces(&s) {
            None => out.push(s),
            Some((open, close)) => {
                for alternative in s[open + 1..close].split(',') {
                    pending.push(format!("{}{}{}", &s[..open], alternative, &s[close + 1..]));
                }
            }
        }
    }
    Ok(())
}

/// The leftmost `{...}` with no brace inside (`\{([^{}]*)\}` searched from the left).
fn innermost_braces(s: &str) -> Option<(usize, usize)> {
    let mut open = None;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'{' => open = Some(i),
            b'}' if open.is_some() => return open.map(|o| (o, i)),
            _ => {}
        }
    }
    None
}

/// Python's `fnmatch.translate`, to tokens.
fn translate(pattern: &str) -> Vec<Token> {
    let pat: Vec<char> = pattern.chars().collect();
    let n = pat.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let c = pat[i];
        i += 1;
        match c {
            '*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::AnyChar),
            '[' => {
                let mut j = i;
                if j < n && pat[j] == '!' {
                    j += 1;
                }
                if j < n && pat[j] == ']' {
                    j += 1;
                }
                while j < n && pat[j] != ']' {
                    j += 1;
                }
                if j >= n {
                    out.push(Token::Literal('['));
                    continue;
                }
                out.push(class(&pat, i, j));
                i = j + 1;
            }
            c => out.push(Token::Literal(c)),
        }
    }
    out
}

/// One bracket expression `pat[i..j]` (between `[` and `]`), as `fnmatch.translate` builds
/// its regex set: hyphen ranges found left to right, reversed ranges dropped.
fn class(pat: &[char], mut i: usize, j: usize) -> Token {
    // The set as fnmatch writes it: literal chars and the hyphens that make ranges.
    #[derive(Clone, Copy, PartialEq)]
    enum Piece {
        Char(char),
        Range,
    }
    let stuff: Vec<char> = pat[i..j].to_vec();
    let mut pieces: Vec<Piece> = Vec::new();
    if !stuff.contains(&'-') {
        pieces.extend(stuff.iter().map(|&c| Piece::Char(c)));
    } else {
        let mut chunks: Vec<Vec<char>> = Vec::new();
        let mut k = if pat[i] == '!' { i + 2 } else { i + 1 };
        loop {
            let found = (k..j).find(|&x| pat[x] == '-');
            let Some(at) = found else { break };
            chunks.push(pat[i..at].to_vec());
            i = at + 1;
            k = at + 3;
        }
        let chunk: Vec<char> = if i <= j {
            pat[i..j].to_vec()
        } else {
            Vec::new()
        };
        if !chunk.is_empty() {
            chunks.push(chunk);
        } else if let Some(last) = chunks.last_mut() {
            last.push('-');
        }
        let mut k = chunks.len();
        while k > 1 {
            k -= 1;
            let reversed = match (chunks[k - 1].last(), chunks[k].first()) {
                (Some(a), Some(b)) => a > b,
                _ => false,
            };
            if reversed {
                let tail: Vec<char> = chunks[k][1..].to_vec();
                chunks[k - 1].pop();
                chunks[k - 1].extend(tail);
                chunks.remove(k);
            }
        }
        for (n, chunk) in chunks.iter().enumerate() {
            if n > 0 {
                pieces.push(Piece::Range);
            }
            pieces.extend(chunk.iter().map(|&c| Piece::Char(c)));
        }
    }
    if pieces.is_empty() {
        return Token::Never;
    }
    if pieces == [Piece::Char('!')] {
        return Token::AnyChar;
    }
    let mut negated = false;
    let mut rest = &pieces[..];
    if rest.first() == Some(&Piece::Char('!')) {
        negated = true;
        rest = &rest[1..];
    }
    let mut items = Vec::new();
    let mut x = 0;
    while x < rest.len() {
        match (rest.get(x), rest.get(x + 1), rest.get(x + 2)) {
            (Some(Piece::Char(lo)), Some(Piece::Range), Some(Piece::Char(hi))) => {
                items.push((*lo, *hi));
                x += 3;
            }
            (Some(Piece::Char(c)), _, _) => {
                items.push((*c, *c));
                x += 1;
            }
            _ => x += 1,
        }
    }
    Token::Class(Class { negated, items })
}

/// Glob matching of single-character tokens and stars, backtracking only to the last star.
fn fnmatch(tokens: &[Token], text: &[char]) -> bool {
    let one = |token: &Token, c: char| match token {
        Token::Literal(l) => *l == c,
        Token::AnyChar => true,
        Token::Class(class) => class.matches(c),
        Token::Never | Token::Star => false,
    };
    let (mut t, mut s) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while s < text.len() {
        if t < tokens.len() && tokens[t] == Token::Star {
            star = Some((t, s));
            t += 1;
        } else if t < tokens.len() && one(&tokens[t], text[s]) {
            t += 1;
            s += 1;
        } else if let Some((st, ss)) = star {
            t = st + 1;
            s = ss + 1;
            star = Some((st, ss + 1));
        } else {
            return false;
        }
    }
    tokens[t..].iter().all(|token| *token == Token::Star)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, node: &str) -> bool {
        Glob::parse(pattern).unwrap().node_matches(0, node)
    }

    #[test]
    fn wildcards_match_within_one_node() {
        assert!(m("*", "anything"));
        assert!(m("*", ""));
        assert!(m("a*c", "abbbc"));
        assert!(!m("a*c", "abbbd"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("host[0-9]", "host7"));
        assert!(!m("host[0-9]", "hostx"));
        assert!(m("host[!0-9]", "hostx"));
        assert!(m("[a-cx]", "x"));
        assert!(m("[]]", "]"));
        assert!(m("[!]]", "a"));
        assert!(m("a[", "a["), "an unclosed bracket is a literal");
        assert!(m("[a-]", "-"));
        assert!(m("[-a]", "-"));
        assert!(!m("[z-a]", "z"), "a reversed range matches nothing");
        assert!(
            m("[!z-a]", "q"),
            "a negated empty set matches any character"
        );
        assert!(m("*a*b*", "xxaxxbxx"));
        assert!(!m("*a*b*", "xxbxxaxx"));
    }

    #[test]
    fn braces_expand_like_expand_braces() {
        assert!(m("{a,b}", "a"));
        assert!(m("{a,b}", "b"));
        assert!(!m("{a,b}", "c"));
        assert!(m("x{a,b}y{1,2}", "xby1"));
        assert!(m("{a,{b,c}}", "c"), "nested braces");
        assert!(m("{a,}", ""), "an empty alternative");
        assert!(m("{a", "{a"), "an unclosed brace is a literal");
        assert!(m("{a*,b}", "abc"));
    }

    #[test]
    fn whole_paths_match_node_by_node() {
        let g = Glob::parse("app.{web,db}*.requests").unwrap();
        assert_eq!(g.depth(), 3);
        assert!(g.matches("app.web1.requests"));
        assert!(g.matches("app.db.requests"));
        assert!(!g.matches("app.web1.requests.count"));
        assert!(!g.matches("app.web1"));
        assert!(!g.matches("app.cache.requests"));
        assert_eq!(g.literal_prefix(), "app.");
        assert_eq!(Glob::parse("a.b.c").unwrap().literal_prefix(), "a.b.c");
        assert!(Glob::parse("a.b.c").unwrap().is_exact());
        assert_eq!(g.text(), "app.{web,db}*.requests");
    }

    #[test]
    fn backslashes_are_dropped_as_the_standard_finder_does() {
        let g = Glob::parse("a\\.b").unwrap();
        assert_eq!(g.depth(), 2);
        assert!(g.matches("a.b"));
    }

    #[test]
    fn brace_explosions_are_refused() {
        let p = "{a,b}".repeat(20);
        assert!(matches!(Glob::parse(&p), Err(Error::InvalidParameters(_))));
        // Many single-alternative groups: no deep recursion, one variant.
        let long = "{a}".repeat(5_000);
        assert!(
            Glob::parse(&long)
                .unwrap()
                .node_matches(0, &"a".repeat(5_000))
        );
    }

    proptest::proptest! {
        #[test]
        fn no_pattern_panics(p in "[a-c*?\\[\\]!{},.-]{0,40}", node in "[a-c.-]{0,10}") {
            if let Ok(g) = Glob::parse(&p) {
                let _ = g.matches(&node);
                let _ = g.node_matches(0, &node);
                let _ = g.literal_prefix();
            }
        }
    }
}

//! The target language of graphite-web 1.1.10 (`render/grammar_unsafe.py`): path
//! expressions, calls with positional then keyword arguments, quoted strings, numbers,
//! booleans, `None`, `inf`, pipes (`a | f()`) and `template(...)`.
//!
//! Owns parsing a target into an [`Expr`], as an ordered-choice parser that takes the same
//! decisions as graphite-web's pyparsing grammar (which tries template, call, then path
//! expression; whitespace skipped between tokens but not inside a path; a number only where
//! a `,` or `)` or the end follows). One deliberate difference: graphite-web parses the
//! longest prefix it can and silently drops the rest (`sumSeries(a.b` is the path
//! `sumSeries`); here a target must parse entirely, else [`crate::Error::InvalidParameters`].
//! It does not evaluate anything (see `eval`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::{Error, Result};

/// A parsed target or argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A path expression (escaping backslashes removed, braces kept).
    Path(String),
    /// A function call; a piped call `x | f(a)` is the call `f(x, a)`.
    Call(Call),
    /// An integer literal.
    Int(i64),
    /// A float literal (plain or scientific).
    Float(f64),
    /// A quoted string, without its quotes and with its backslashes kept (graphite-web
    /// does not unescape strings).
    Str(String),
    /// `true` / `false`, any case.
    Bool(bool),
    /// `none`, any case.
    None,
    /// `inf`, any case.
    Inf,
    /// `template(expr, args...)`: `$name` in the expression's paths replaced by the values.
    Template(Box<Template>),
}

/// A function call.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function's name.
    pub name: String,
    /// Positional arguments, the piped-in expression first.
    pub args: Vec<Expr>,
    /// Keyword arguments, in order.
    pub kwargs: Vec<(String, Expr)>,
}

/// A `template(...)` call: its expression and its literal values (positional ones named
/// `1`, `2`, ...; keyword ones by their names).
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The templated call or path expression.
    pub expr: Expr,
    /// Positional literal values, numbered from 1.
    pub args: Vec<Expr>,
    /// Keyword literal values.
    pub kwargs: Vec<(String, Expr)>,
}

impl Expr {
    /// Parses a whole target (leading and trailing whitespace allowed).
    pub fn parse(target: &str) -> Result<Expr> {
        let p = Parser::new(target);
        let parsed = p.expression(0);
        if p.too_deep.get() {
            return Err(Error::invalid(format!(
                "could not parse target {target:?}: calls nested deeper than {MAX_DEPTH}"
            )));
        }
        match parsed {
            Some((expr, end)) if p.skip_ws(end) == p.s.len() => Ok(expr),
            Some((_, end)) => {
                let at = p.skip_ws(end).max(p.furthest.get());
                Err(p.error(target, at))
            }
            None => Err(p.error(target, p.furthest.get())),
        }
    }
}

/// Calls nested deeper than this are refused (the parser recurses).
pub const MAX_DEPTH: usize = 64;

/// The expression graphite-web's grammar reads from the start of `text`, ignoring what
/// follows (how its `_getFirstPathExpression` reads a series name); `None` when nothing
/// parses.
pub fn parse_prefix(text: &str) -> Option<Expr> {
    let p = Parser::new(text);
    p.expression(0).map(|(expr, _)| expr)
}

struct Parser<'a> {
    s: &'a [u8],
    /// The furthest position a token was tried at, for the error message.
    furthest: Cell<usize>,
    depth: Cell<usize>,
    too_deep: Cell<bool>,
    /// Results by position, so that alternatives re-trying the same text stay linear.
    calls: RefCell<HashMap<usize, Parsed<Call>>>,
    expressions: RefCell<HashMap<usize, Parsed<Expr>>>,
}

type Parsed<T> = Option<(T, usize)>;

const SYMBOLS: &[u8] = b"(){},.'\"\\|";

fn is_metric_char(b: u8) -> bool {
    (33..=126).contains(&b) && !SYMBOLS.contains(&b)
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_keyword_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            s: text.as_bytes(),
            furthest: Cell::new(0),
            depth: Cell::new(0),
            too_deep: Cell::new(false),
            calls: RefCell::new(HashMap::new()),
            expressions: RefCell::new(HashMap::new()),
        }
    }
}

impl Parser<'_> {
    fn error(&self, target: &str, at: usize) -> Error {
        let found = match target.get(at..).and_then(|rest| rest.chars().next()) {
            Some(c) => format!("unexpected {c:?}"),
            None => "unexpected end".to_owned(),
        };
        Error::invalid(format!(
            "could not parse target {target:?}: {found} at character {at}"
        ))
    }

    fn touch(&self, pos: usize) {
        if pos > self.furthest.get() {
            self.furthest.set(pos);
        }
    }

    fn peek(&self, pos: usize) -> Option<u8> {
        self.s.get(pos).copied()
    }

    fn skip_ws(&self, mut pos: usize) -> usize {
        while matches!(self.peek(pos), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            pos += 1;
        }
        pos
    }

    /// A literal byte after optional whitespace.
    fn lit(&self, pos: usize, b: u8) -> Option<usize> {
        let pos = self.skip_ws(pos);
        self.touch(pos);
        (self.peek(pos) == Some(b)).then_some(pos + 1)
    }

    fn word(&self, pos: usize) -> Parsed<String> {
        let start = self.skip_ws(pos);
        self.touch(start);
        if !self.peek(start).is_some_and(is_word_start) {
            return None;
        }
        let mut end = start + 1;
        while self.peek(end).is_some_and(is_word_char) {
            end += 1;
        }
        Some((
            String::from_utf8_lossy(&self.s[start..end]).into_owned(),
            end,
        ))
    }

    /// `expression`: (template | call | pathExpression) followed by piped calls.
    fn expression(&self, pos: usize) -> Parsed<Expr> {
        if let Some(done) = self.expressions.borrow().get(&pos) {
            return done.clone();
        }
        let depth = self.depth.get();
        if depth >= MAX_DEPTH {
            self.too_deep.set(true);
            return None;
        }
        self.depth.set(depth + 1);
        let parsed = self.expression_uncached(pos);
        self.depth.set(depth);
        self.expressions.borrow_mut().insert(pos, parsed.clone());
        parsed
    }

    fn expression_uncached(&self, pos: usize) -> Parsed<Expr> {
        let (mut expr, mut end) = self
            .template(pos)
            .or_else(|| self.call(pos).map(|(c, e)| (Expr::Call(c), e)))
            .or_else(|| self.path(pos).map(|(p, e)| (Expr::Path(p), e)))?;
        while let Some(after_bar) = self.lit(end, b'|') {
            let Some((mut call, call_end)) = self.call(after_bar) else {
                break;
            };
            call.args.insert(0, expr);
            expr = Expr::Call(call);
            end = call_end;
        }
        Some((expr, end))
    }

    fn call(&self, pos: usize) -> Parsed<Call> {
        if let Some(done) = self.calls.borrow().get(&pos) {
            return done.clone();
        }
        let parsed = self.call_uncached(pos);
        self.calls.borrow_mut().insert(pos, parsed.clone());
        parsed
    }

    fn call_uncached(&self, pos: usize) -> Parsed<Call> {
        let (name, pos) = self.word(pos)?;
        let mut pos = self.lit(pos, b'(')?;
        let mut kwargs = Vec::new();
        let (args, end) = self.delimited(pos, |p| self.positional(p));
        if !args.is_empty() {
            pos = end;
            if let Some(comma) = self.lit(pos, b',') {
                let (found, end) = self.delimited(comma, |p| self.kwarg(p, false));
                if !found.is_empty() {
                    kwargs = found;
                    pos = end;
                }
            }
        }
        let pos = self.lit(pos, b')')?;
        Some((Call { name, args, kwargs }, pos))
    }

    /// pyparsing's `delimitedList(item)`: one item, then as many `, item` as parse; empty
    /// (at `pos`) when the first does not.
    fn delimited<T>(&self, pos: usize, item: impl Fn(usize) -> Parsed<T>) -> (Vec<T>, usize) {
        let mut found = Vec::new();
        let Some((first, mut end)) = item(pos) else {
            return (found, pos);
        };
        found.push(first);
        while let Some(comma) = self.lit(end, b',') {
            let Some((next, after)) = item(comma) else {
                break;
            };
            found.push(next);
            end = after;
        }
        (found, end)
    }

    /// `~kwarg + arg`.
    fn positional(&self, pos: usize) -> Parsed<Expr> {
        if self.kwarg(pos, false).is_some() {
            return None;
        }
        self.arg(pos)
    }

    /// `argname = arg` (or `= litarg` inside a template).
    fn kwarg(&self, pos: usize, literal: bool) -> Parsed<(String, Expr)> {
        let (name, pos) = self.word(pos)?;
        let pos = self.lit(pos, b'=')?;
        let (value, pos) = if literal {
            self.litarg(pos)?
        } else {
            self.arg(pos)?
        };
        Some(((name, value), pos))
    }

    /// `boolean | number | none | aString | infinity | expression`.
    fn arg(&self, pos: usize) -> Parsed<Expr> {
        if let Some(found) = self.keyword(pos, "true") {
            return Some((Expr::Bool(true), found));
        }
        if let Some(found) = self.keyword(pos, "false") {
            return Some((Expr::Bool(false), found));
        }
        if let Some(found) = self.number(pos) {
            return Some(found);
        }
        if let Some(found) = self.keyword(pos, "none") {
            return Some((Expr::None, found));
        }
        if let Some((s, end)) = self.string(pos) {
            return Some((Expr::Str(s), end));
        }
        if let Some(found) = self.keyword(pos, "inf") {
            return Some((Expr::Inf, found));
        }
        self.expression(pos)
    }

    /// `number | aString` (a template's literal).
    fn litarg(&self, pos: usize) -> Parsed<Expr> {
        self.number(pos)
            .or_else(|| self.string(pos).map(|(s, e)| (Expr::Str(s), e)))
    }

    /// A caseless keyword: not followed (nor preceded) by a keyword character.
    fn keyword(&self, pos: usize, word: &str) -> Option<usize> {
        let pos = self.skip_ws(pos);
        self.touch(pos);
        let end = pos + word.len();
        let text = self.s.get(pos..end)?;
        if !text.eq_ignore_ascii_case(word.as_bytes()) {
            return None;
        }
        if pos > 0 && is_keyword_char(self.s[pos - 1]) {
            return None;
        }
        if self.peek(end).is_some_and(is_keyword_char) {
            return None;
        }
        Some(end)
    }

    /// `(sci | float | int)` each followed by a `,`, a `)` or the end of a line.
    fn number(&self, pos: usize) -> Parsed<Expr> {
        let start = self.skip_ws(pos);
        self.touch(start);
        let int_at = |p: usize| -> Option<usize> {
            let mut q = p;
            if self.peek(q) == Some(b'-') {
                q += 1;
            }
            let digits = q;
            while self.peek(q).is_some_and(|b| b.is_ascii_digit()) {
                q += 1;
            }
            (q > digits).then_some(q)
        };
        let float_at = |p: usize| -> Option<usize> {
            let q = int_at(p)?;
            if self.peek(q) != Some(b'.') {
                return None;
            }
            let mut r = q + 1;
            let digits = r;
            while self.peek(r).is_some_and(|b| b.is_ascii_digit()) {
                r += 1;
            }
            (r > digits).then_some(r)
        };
        let text = |end: usize| String::from_utf8_lossy(&self.s[start..end]).into_owned();
        // Scientific: (float | int) e int, adjacent.
        if let Some(mantissa) = float_at(start).or_else(|| int_at(start))
            && matches!(self.peek(mantissa), Some(b'e' | b'E'))
            && let Some(end) = int_at(mantissa + 1)
            && self.after_number(end)
        {
            return text(end).parse::<f64>().ok().map(|v| (Expr::Float(v), end));
        }
        if let Some(end) = float_at(start)
            && self.after_number(end)
        {
            return text(end).parse::<f64>().ok().map(|v| (Expr::Float(v), end));
        }
        if let Some(end) = int_at(start)
            && self.after_number(end)
        {
            return match text(end).parse::<i64>() {
                Ok(v) => Some((Expr::Int(v), end)),
                // Python's ints are unbounded; past i64 the value is kept as a float.
                Err(_) => text(end).parse::<f64>().ok().map(|v| (Expr::Float(v), end)),
            };
        }
        None
    }

    /// `FollowedBy(",") ^ FollowedBy(")") ^ FollowedBy(LineEnd())`.
    fn after_number(&self, pos: usize) -> bool {
        let p = self.skip_ws(pos);
        if matches!(self.peek(p), None | Some(b',' | b')')) {
            return true;
        }
        let mut q = pos;
        while matches!(self.peek(q), Some(b' ' | b'\t' | b'\r')) {
            q += 1;
        }
        matches!(self.peek(q), None | Some(b'\n'))
    }

    /// pyparsing's `quotedString`: `"..."` or `'...'`, a doubled quote or a backslash
    /// escape (`\x` only with hex digits) inside, no bare newline.
    fn string(&self, pos: usize) -> Parsed<String> {
        let start = self.skip_ws(pos);
        self.touch(start);
        let quote = self.peek(start)?;
        if quote != b'"' && quote != b'\'' {
            return None;
        }
        let mut p = start + 1;
        loop {
            match self.peek(p) {
                Some(b) if b != quote && b != b'\n' && b != b'\r' && b != b'\\' => p += 1,
                Some(b) if b == quote && self.peek(p + 1) == Some(quote) => p += 2,
                Some(b'\\') => match self.peek(p + 1) {
                    Some(b'x') => {
                        let mut q = p + 2;
                        while self.peek(q).is_some_and(|b| b.is_ascii_hexdigit()) {
                            q += 1;
                        }
                        if q == p + 2 {
                            break;
                        }
                        p = q;
                    }
                    Some(_) => {
                        // One escaped character (UTF-8: its whole sequence).
                        p += 2;
                        while self.peek(p).is_some_and(|b| (b & 0xC0) == 0x80) {
                            p += 1;
                        }
                    }
                    None => break,
                },
                _ => break,
            }
        }
        self.touch(p);
        if self.peek(p) != Some(quote) {
            return None;
        }
        let inner = String::from_utf8_lossy(&self.s[start + 1..p]).into_owned();
        Some((inner, p + 1))
    }

    /// `pathExpression`: path elements joined by dots, no whitespace inside.
    fn path(&self, pos: usize) -> Parsed<String> {
        let start = self.skip_ws(pos);
        let (text, end) = self.element(start)?;
        Some(self.separated(text, end, b'.', Self::element))
    }

    /// A path element: adjacent partial elements and `{a,b}` enumerations, at least one.
    fn element(&self, pos: usize) -> Parsed<String> {
        let mut text = String::new();
        let mut end = pos;
        loop {
            if let Some((enumeration, next)) = self.enumeration(end) {
                text.push_str(&enumeration);
                end = next;
            } else if let Some((partial, next)) = self.partial(end) {
                text.push_str(&partial);
                end = next;
            } else {
                break;
            }
        }
        self.touch(end);
        (end > pos).then_some((text, end))
    }

    /// Metric characters and backslash-escaped symbols (the backslash dropped).
    fn partial(&self, pos: usize) -> Parsed<String> {
        let mut out = Vec::new();
        let mut p = pos;
        loop {
            match self.peek(p) {
                Some(b) if is_metric_char(b) => {
                    out.push(b);
                    p += 1;
                }
                Some(b'\\') => match self.peek(p + 1) {
                    Some(e) if SYMBOLS.contains(&e) || e == b'=' => {
                        out.push(e);
                        p += 2;
                    }
                    _ => break,
                },
                _ => break,
            }
        }
        self.touch(p);
        (p > pos).then(|| (String::from_utf8_lossy(&out).into_owned(), p))
    }

    /// `text` (ending at `end`) followed by each further `item` after a
    /// `sep`, as long as one parses; the whole text and where it ends.
    fn separated(
        &self,
        mut text: String,
        mut end: usize,
        sep: u8,
        item: fn(&Self, usize) -> Parsed<String>,
    ) -> (String, usize) {
        while self.peek(end) == Some(sep) {
            let Some((more, next)) = item(self, end + 1) else {
                break;
            };
            text.push(char::from(sep));
            text.push_str(&more);
            end = next;
        }
        (text, end)
    }

    /// `{partial,partial,...}`, kept with its braces and commas.
    fn enumeration(&self, pos: usize) -> Parsed<String> {
        if self.peek(pos) != Some(b'{') {
            return None;
        }
        let (first, p) = self.partial(pos + 1)?;
        let (mut text, p) = self.separated(format!("{{{first}"), p, b',', Self::partial);
        self.touch(p);
        if self.peek(p) != Some(b'}') {
            return None;
        }
        text.push('}');
        Some((text, p + 1))
    }

    /// `template(call | path [, litargs | litkwargs])`.
    fn template(&self, pos: usize) -> Parsed<Expr> {
        let start = self.skip_ws(pos);
        self.touch(start);
        if !self.s[start..].starts_with(b"template") {
            return None;
        }
        let pos = self.lit(start + b"template".len(), b'(')?;
        let (expr, mut pos) = self
            .call(pos)
            .map(|(c, e)| (Expr::Call(c), e))
            .or_else(|| self.path(pos).map(|(p, e)| (Expr::Path(p), e)))?;
        let (mut args, mut kwargs) = (Vec::new(), Vec::new());
        if let Some(comma) = self.lit(pos, b',') {
            // `litargs | litkwargs`: positional literals (none looking like a keyword one),
            // or else keyword literals.
            let positional = |p| {
                if self.kwarg(p, true).is_some() {
                    None
                } else {
                    self.litarg(p)
                }
            };
            let (found, end) = self.delimited(comma, positional);
            if !found.is_empty() {
                args = found;
                pos = end;
            } else {
                let (found, end) = self.delimited(comma, |p| self.kwarg(p, true));
                if !found.is_empty() {
                    kwargs = found;
                    pos = end;
                }
            }
        }
        let pos = self.lit(pos, b')')?;
        Some((
            Expr::Template(Box::new(Template { expr, args, kwargs })),
            pos,
        ))
    }
}

#[cfg(test)]
mod tests;

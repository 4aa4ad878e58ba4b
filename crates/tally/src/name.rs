//! Validated names for counters (and the other named things of Tally).
//!
//! A [`Name`] is 1 to 256 characters (Unicode scalar values, so at most
//! 1,024 bytes of UTF-8) with no control characters. The rule is checked
//! once, at the edge, so stores can put names into keys and SQL parameters
//! without checking again. It counts characters, not bytes, so that the HTTP
//! API's document can state it exactly (JSON Schema's `maxLength` counts
//! characters).

use std::borrow::Borrow;
use std::fmt;

use crate::error::{Error, Result};

/// The longest accepted name, in characters (Unicode scalar values).
pub const MAX_NAME_CHARS: usize = 256;

/// A validated name: 1 to [`MAX_NAME_CHARS`] characters, no control
/// characters.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Name(String);

impl Name {
    /// Validates `name`.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        Self::check(&name)?;
        Ok(Name(name))
    }

    /// Checks `name` against the rules without allocating.
    pub fn check(name: &str) -> Result<()> {
        if name.is_empty() {
            return Err(Error::invalid_name(name, "a name must not be empty"));
        }
        // Cheap first: fewer bytes than the limit means fewer characters.
        if name.len() > MAX_NAME_CHARS {
            let chars = name.chars().count();
            if chars > MAX_NAME_CHARS {
                return Err(Error::invalid_name(
                    name,
                    format!(
                        "a name must be at most {MAX_NAME_CHARS} characters, this one has {chars}"
                    ),
                ));
            }
        }
        // Cheap first: a name of printable ASCII (the usual one) needs no
        // decoding; a control or non-ASCII byte is judged by characters.
        let control =
            name.bytes().any(|b| !(0x20..0x7f).contains(&b)) && name.chars().any(char::is_control);
        if control {
            let c = name.chars().find(|c| c.is_control()).unwrap_or_default();
            return Err(Error::invalid_name(
                name,
                format!(
                    "a name must not contain control characters (found U+{:04X})",
                    c as u32
                ),
            ));
        }
        Ok(())
    }

    /// Validates `name` as a part of a Redis hash tag (a time-series model
    /// or key, a daily entity id): a name without `{` or `}`, which would
    /// change the tag. `what` names it in the message (`a key`).
    pub fn untagged(what: &str, name: &str) -> Result<Self> {
        let checked = Name::new(name)?;
        if name.contains(['{', '}']) {
            return Err(Error::invalid_name(
                name,
                format!("{what} must not contain `{{` or `}}`"),
            ));
        }
        Ok(checked)
    }

    /// Wraps a string that already passed [`Name::check`].
    pub(crate) fn from_checked(name: String) -> Self {
        debug_assert!(Self::check(&name).is_ok());
        Name(name)
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Name {
    type Error = Error;
    fn try_from(value: &str) -> Result<Self> {
        Name::new(value)
    }
}

impl TryFrom<String> for Name {
    type Error = Error;
    fn try_from(value: String) -> Result<Self> {
        Name::new(value)
    }
}

/// Checks a listing's name prefix (at most [`MAX_NAME_CHARS`] characters,
/// no control characters) and page size (1 to `max`).
pub fn check_search(prefix: &str, limit: usize, max: usize) -> Result<()> {
    if prefix.chars().count() > MAX_NAME_CHARS || prefix.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!(
            "a name prefix is at most {MAX_NAME_CHARS} characters, without control characters"
        )));
    }
    if limit == 0 || limit > max {
        return Err(Error::InvalidInput(format!(
            "a page holds 1 to {max} names, got {limit}"
        )));
    }
    Ok(())
}

/// The least string above every string that starts with `prefix`, so that
/// `[prefix, upper)` is exactly the strings starting with `prefix` (in byte
/// order, which is code point order). `None` when no such string exists (an
/// empty prefix, or one of only `char::MAX`).
pub fn prefix_upper(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// A stable 64-bit hash of a name (FNV-1a): the same in every process and
/// version, so what picks a shard from it finds the same one every time.
pub(crate) fn fnv1a(name: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_upper_bounds_the_prefix_range() {
        assert_eq!(prefix_upper("api").as_deref(), Some("apj"));
        assert_eq!(prefix_upper("5:").as_deref(), Some("5;"));
        assert_eq!(prefix_upper("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(prefix_upper("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_upper(""), None);
    }

    proptest! {
        /// The ASCII fast path refuses exactly the names with a control
        /// character, as the character-by-character rule does.
        #[test]
        fn control_characters_are_refused_with_or_without_the_ascii_path(name in "[\\x00-\\x7f\\u{80}-\\u{a0}é]{1,12}") {
            prop_assert_eq!(Name::check(&name).is_err(), name.chars().any(char::is_control));
        }

        #[test]
        fn prefix_range_is_exact(prefix in "\\PC{0,4}", tail in "\\PC{0,3}", other in "\\PC{0,6}", joined: bool) {
            // Half the cases start with the prefix, half are anything.
            let s = if joined { format!("{prefix}{tail}") } else { other };
            let inside = match prefix_upper(&prefix) {
                Some(upper) => s.as_str() >= prefix.as_str() && s < upper,
                None => s.as_str() >= prefix.as_str(),
            };
            prop_assert_eq!(inside, s.starts_with(&prefix));
        }
    }

    #[test]
    fn rejects_empty_long_and_control_names() {
        assert!(
            Name::new("")
                .unwrap_err()
                .to_string()
                .contains("must not be empty")
        );
        let long = "x".repeat(257);
        assert!(
            Name::new(long)
                .unwrap_err()
                .to_string()
                .contains("at most 256 characters")
        );
        assert!(
            Name::new("a\nb")
                .unwrap_err()
                .to_string()
                .contains("U+000A")
        );
        assert!(Name::new("tab\there").is_err());
        assert!(Name::new("del\u{7f}").is_err());
        assert!(Name::new("x".repeat(256)).is_ok());
        // Characters count, not bytes: 256 four-byte characters pass.
        assert!(Name::new("é".repeat(256)).is_ok());
        assert!(Name::new("😀".repeat(256)).is_ok());
        assert!(Name::new("é".repeat(257)).is_err());
    }

    #[test]
    fn accepts_ordinary_names() {
        for name in [
            "hits",
            "api:calls:user:42",
            "{tagged}",
            "page/views?x=1",
            "счётчик",
            "a b",
        ] {
            assert_eq!(Name::new(name).unwrap().as_str(), name);
        }
    }

    proptest! {
        #[test]
        fn valid_iff_nonempty_short_and_printable(s in "\\PC{0,80}|.{0,3}[\\x00-\\x1f].{0,3}") {
            let expected = !s.is_empty() && s.chars().count() <= MAX_NAME_CHARS && !s.chars().any(char::is_control);
            prop_assert_eq!(Name::new(s.clone()).is_ok(), expected);
        }
    }
}

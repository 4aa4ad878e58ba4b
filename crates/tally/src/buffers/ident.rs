//! SQL identifiers from configuration: validated, then always quoted.
//!
//! An [`Ident`] is 1 to 63 ASCII letters, digits or underscores, not starting
//! with a digit. That rule alone rules out injection through table or column
//! names; the sinks quote every identifier anyway ([`Ident::quoted`]), so a
//! name that happens to be a keyword (`order`, `user`) still works.

use std::fmt;

use crate::error::{Error, Result};

/// The longest accepted identifier (PostgreSQL's limit).
pub const MAX_IDENT_BYTES: usize = 63;

/// A validated SQL identifier (table or column name).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Ident(String);

impl Ident {
    /// Validates `name`; `what` says what it names, for the error message.
    pub fn new(name: &str, what: &str) -> Result<Self> {
        let ok = !name.is_empty()
            && name.len() <= MAX_IDENT_BYTES
            && !name.as_bytes()[0].is_ascii_digit()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(Error::Config(format!(
                "{what} {name:?} is not a valid SQL identifier: use 1 to \
                 {MAX_IDENT_BYTES} ASCII letters, digits or underscores, not starting with a digit"
            )));
        }
        Ok(Ident(name.to_owned()))
    }

    /// The bare name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name in double quotes, as it goes into SQL.
    pub fn quoted(&self) -> String {
        // Validation excludes '"', so no escaping is needed.
        format!("\"{}\"", self.0)
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_anything_that_could_inject() {
        for bad in [
            "",
            "1abc",
            "a b",
            "a\"b",
            "x; DROP TABLE y",
            "a-b",
            "é",
            "t.c",
            &"x".repeat(64),
        ] {
            let e = Ident::new(bad, "column").unwrap_err().to_string();
            assert!(e.contains("not a valid SQL identifier"), "{bad}: {e}");
        }
        assert_eq!(Ident::new("order", "table").unwrap().quoted(), "\"order\"");
        assert!(Ident::new("_x9", "table").is_ok());
    }

    proptest! {
        #[test]
        fn valid_idents_quote_cleanly(s in "[A-Za-z_][A-Za-z0-9_]{0,62}") {
            let id = Ident::new(&s, "column").unwrap();
            prop_assert_eq!(id.quoted(), format!("\"{s}\""));
        }
        #[test]
        fn anything_with_a_quote_is_rejected(a in "[a-z]{0,5}", b in "[a-z]{0,5}") {
            let s = format!("{a}\"{b}");
            prop_assert!(Ident::new(&s, "t").is_err());
        }
    }
}

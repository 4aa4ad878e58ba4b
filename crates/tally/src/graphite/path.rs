//! Names as Graphite paths: how a series name becomes nodes a target can
//! carry, and where a family of series sits in the namespace.
//!
//! Dots separate nodes. Characters Graphite's target grammar cannot carry
//! (space, parentheses, braces, comma, equals sign, quotes, backslash)
//! become `_`, and an empty node becomes `_`, so every name has a path
//! (`tally:http:route:GET /v1/counters/{name}` is
//! `tally:http:route:GET_/v1/counters/_name_`). The mapping is not one to
//! one: `a b` and `a_b` share a path; [`super`] says which answers.
//!
//! Pure functions over strings; nothing here reads a store.

/// True for a character a Graphite target cannot carry inside a path.
pub fn is_unsafe(c: char) -> bool {
    matches!(
        c,
        ' ' | '(' | ')' | '{' | '}' | ',' | '=' | '"' | '\'' | '\\'
    )
}

/// The path of `name`: unsafe characters as `_`, empty nodes as `_`.
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    for node in name.split('.') {
        if !out.is_empty() {
            out.push('.');
        }
        if node.is_empty() {
            out.push('_');
        } else {
            out.extend(node.chars().map(|c| if is_unsafe(c) { '_' } else { c }));
        }
    }
    out
}

/// The longest prefix of a name that every name escaping to a path
/// starting with `path_prefix` shares: the text before its first `_`
/// (which may stand for any unsafe character or an empty node).
pub fn name_prefix(path_prefix: &str) -> &str {
    match path_prefix.find('_') {
        Some(i) => &path_prefix[..i],
        None => path_prefix,
    }
}

/// Joins path parts with dots, leaving out empty parts (a family's empty
/// root, a series' own leaf).
pub fn join(parts: &[&str]) -> String {
    let mut out = String::new();
    for p in parts.iter().filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn safe_names_are_their_own_paths() {
        for name in ["app.host1.requests", "hits", "shop:checkout-2/x"] {
            assert_eq!(escape(name), name);
        }
    }

    #[test]
    fn unsafe_characters_and_empty_nodes_become_underscores() {
        for (name, path) in [
            (
                "tally:http:route:GET /v1/counters/{name}",
                "tally:http:route:GET_/v1/counters/_name_",
            ),
            ("a(b),c=d\"e'f\\g", "a_b__c_d_e_f_g"),
            ("a..b", "a._.b"),
            (".a", "_.a"),
            ("a.", "a._"),
            (".", "_._"),
        ] {
            assert_eq!(escape(name), path, "{name:?}");
        }
    }

    #[test]
    fn name_prefixes_stop_at_the_first_underscore() {
        assert_eq!(name_prefix("app.host1."), "app.host1.");
        assert_eq!(
            name_prefix("tally:http:route:GET_/v1"),
            "tally:http:route:GET"
        );
        assert_eq!(name_prefix("_x"), "");
    }

    #[test]
    fn join_leaves_out_empty_parts() {
        assert_eq!(join(&["", "api", ""]), "api");
        assert_eq!(
            join(&["stats.timers", "api", "upper_90"]),
            "stats.timers.api.upper_90"
        );
    }

    proptest! {
        /// Every name's path has as many nodes as the name, none empty, and
        /// no character a target cannot carry; a name starting with a
        /// path's name prefix is what listing by that prefix finds.
        #[test]
        fn paths_are_target_safe(name in "[a-z._ (){},=\"'\\\\:/-]{1,24}") {
            let path = escape(&name);
            prop_assert_eq!(path.split('.').count(), name.split('.').count());
            prop_assert!(path.split('.').all(|n| !n.is_empty()));
            prop_assert!(!path.chars().any(is_unsafe));
            for cut in 0..=path.len() {
                if path.is_char_boundary(cut) {
                    prop_assert!(name.starts_with(name_prefix(&path[..cut])));
                }
            }
        }
    }
}

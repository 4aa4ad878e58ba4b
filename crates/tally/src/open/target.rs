//! Where [`Tally::open`](super::Tally::open) connects: a target string read
//! into a [`BackendConfig`], a pure function.
//!
//! The accepted forms ([`FORMS`]):
//!
//! - `redis://[user:password@]host[:port][/db]`: a standalone Redis server;
//!   `rediss://` for TLS. The URL goes to the Redis client as it is.
//! - `redis+cluster://[user:password@]host:port,host:port,...`: a Redis
//!   Cluster, through any of its nodes (each a seed `redis://[user:password@]host:port`);
//!   `rediss+cluster://` for TLS. A trailing `/` is allowed, nothing else
//!   after the nodes (a cluster has no database number).
//! - `sqlite::memory:` (or `:memory:`): the embedded store in memory.
//! - `sqlite:///path/to/dir`, `sqlite:relative/dir` or a bare path: the
//!   embedded store in that data directory (`tally.sqlite3` inside it),
//!   created if missing, as `tally --data-dir`.
//!
//! A target that starts with any other scheme (`postgres://`, `redis:host`,
//! `localhost:6379`) is refused rather than taken for a directory; a path
//! whose first part holds a `:` is written `./a:b`. Only the form is checked
//! here: the Redis client checks the rest of a URL when connecting.

use crate::backend::BackendConfig;
use crate::backend::redis::Layout;
use crate::error::{Error, Result};

/// The accepted target forms, as listed in error messages.
pub const FORMS: &str = "redis://[user:password@]host[:port][/db], rediss://... (TLS), \
     redis+cluster://[user:password@]host:port,host:port,... (rediss+cluster:// for TLS), \
     sqlite::memory:, sqlite:///path/to/data-dir, or a data directory path";

/// Reads `target` into a backend configuration, with `layout` for Redis.
pub fn parse(target: &str, layout: Layout) -> Result<BackendConfig> {
    let bad = |what: String| Error::Config(format!("{what}; accepted: {FORMS}"));
    let shown = redact(target);
    let trimmed = target.trim();
    if trimmed.is_empty() {
        return Err(bad("the target is empty".into()));
    }
    if trimmed != target {
        return Err(bad(format!("target {shown:?} has spaces around it")));
    }
    if target == ":memory:" {
        return Ok(BackendConfig::SqliteMemory);
    }
    let Some((scheme, rest)) = scheme_of(target) else {
        return Ok(BackendConfig::SqliteDir(target.into()));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "redis" | "rediss" => {
            if !rest.starts_with("//") || rest.len() == 2 {
                return Err(bad(format!(
                    "Redis URL {shown:?} needs a host after `{scheme}://`"
                )));
            }
            Ok(BackendConfig::Redis {
                url: target.to_owned(),
                layout,
            })
        }
        "redis+cluster" | "rediss+cluster" => {
            let seed_scheme = &scheme[..scheme.len() - "+cluster".len()];
            let urls = cluster_seeds(seed_scheme, rest)
                .map_err(|why| bad(format!("cluster target {shown:?} {why}")))?;
            Ok(BackendConfig::RedisCluster { urls, layout })
        }
        "sqlite" => {
            if rest == ":memory:" {
                return Ok(BackendConfig::SqliteMemory);
            }
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(bad(format!("{shown:?} names no data directory")));
            }
            Ok(BackendConfig::SqliteDir(path.into()))
        }
        _ if rest.chars().all(|c| c.is_ascii_digit()) => Err(bad(format!(
            "{target:?} looks like host:port without a scheme (did you mean redis://{target}/?)"
        ))),
        _ => Err(bad(format!(
            "unknown scheme {scheme:?} in target {shown:?}"
        ))),
    }
}

/// The URL scheme and what follows its `:`, when `target` starts with one
/// (two or more of letters, digits, `+`, `-`, `.`, beginning with a letter,
/// so that a Windows drive letter is still a path).
fn scheme_of(target: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = target.split_once(':')?;
    let is_scheme = scheme.len() >= 2
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    is_scheme.then_some((scheme, rest))
}

/// `target` with what stands before its last `@` after the scheme (a user
/// and password) replaced by `***`, for messages.
fn redact(target: &str) -> String {
    match (scheme_of(target), target.rfind('@')) {
        (Some((scheme, rest)), Some(at)) => {
            let slashes = if rest.starts_with("//") { "//" } else { "" };
            format!("{scheme}:{slashes}***{}", &target[at..])
        }
        _ => target.to_owned(),
    }
}

/// The seed URLs of `//[userinfo@]host:port,host:port[/]`, each as
/// `<scheme>://[userinfo@]host:port`; the error says what is wrong.
fn cluster_seeds(scheme: &str, rest: &str) -> std::result::Result<Vec<String>, String> {
    let rest = rest
        .strip_prefix("//")
        .ok_or("needs `//` after the scheme")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (userinfo, hosts) = match rest.rsplit_once('@') {
        Some((user, hosts)) => (Some(user), hosts),
        None => (None, rest),
    };
    if hosts.contains(['/', '?', '#']) {
        return Err("has something after its nodes (a cluster takes no path or query)".into());
    }
    let mut urls = Vec::new();
    for node in hosts.split(',') {
        match node.rsplit_once(':') {
            Some((host, port))
                if !host.is_empty()
                    && !port.is_empty()
                    && port.chars().all(|c| c.is_ascii_digit()) => {}
            _ => return Err(format!("has node {node:?}, which is not host:port")),
        }
        urls.push(match userinfo {
            Some(user) => format!("{scheme}://{user}@{node}"),
            None => format!("{scheme}://{node}"),
        });
    }
    Ok(urls)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn parse_default(target: &str) -> Result<BackendConfig> {
        parse(target, Layout::default())
    }

    #[test]
    fn redis_urls_go_to_the_client_as_they_are() {
        for url in [
            "redis://127.0.0.1/",
            "redis://:secret@cache:6380/2",
            "rediss://user:pw@redis.example:6379",
            "REDIS://host",
        ] {
            assert_eq!(
                parse_default(url).unwrap(),
                BackendConfig::Redis {
                    url: url.into(),
                    layout: Layout::default()
                }
            );
        }
        let ria = parse("redis://h/", Layout::Ria).unwrap();
        assert_eq!(
            ria,
            BackendConfig::Redis {
                url: "redis://h/".into(),
                layout: Layout::Ria
            }
        );
    }

    #[test]
    fn a_cluster_target_lists_its_seed_nodes() {
        let tagged = Layout::default_under("app").unwrap();
        assert_eq!(
            parse(
                "redis+cluster://10.0.0.1:7000,10.0.0.2:7001/",
                tagged.clone()
            )
            .unwrap(),
            BackendConfig::RedisCluster {
                urls: vec![
                    "redis://10.0.0.1:7000".into(),
                    "redis://10.0.0.2:7001".into()
                ],
                layout: tagged,
            }
        );
        // Credentials apply to every seed; TLS keeps its scheme.
        assert_eq!(
            parse_default("rediss+cluster://u:p@a:1,b:2").unwrap(),
            BackendConfig::RedisCluster {
                urls: vec!["rediss://u:p@a:1".into(), "rediss://u:p@b:2".into()],
                layout: Layout::default(),
            }
        );
        assert_eq!(
            parse_default("redis+cluster://[::1]:7000").unwrap(),
            BackendConfig::RedisCluster {
                urls: vec!["redis://[::1]:7000".into()],
                layout: Layout::default(),
            }
        );
    }

    #[test]
    fn sqlite_targets_name_memory_or_a_data_directory() {
        assert_eq!(
            parse_default("sqlite::memory:").unwrap(),
            BackendConfig::SqliteMemory
        );
        assert_eq!(
            parse_default(":memory:").unwrap(),
            BackendConfig::SqliteMemory
        );
        for (target, dir) in [
            ("sqlite:///var/lib/tally", "/var/lib/tally"),
            ("sqlite:data", "data"),
            ("/var/lib/tally", "/var/lib/tally"),
            ("./data", "./data"),
            ("data", "data"),
            ("./a:b", "./a:b"),
            ("C:\\tally", "C:\\tally"),
        ] {
            assert_eq!(
                parse_default(target).unwrap(),
                BackendConfig::SqliteDir(PathBuf::from(dir)),
                "{target}"
            );
        }
    }

    #[test]
    fn a_bad_target_says_what_is_wrong_and_lists_the_accepted_forms() {
        for (target, says) in [
            ("", "the target is empty"),
            (" redis://h/", "spaces around it"),
            ("redis://", "needs a host"),
            ("redis:h", "needs a host"),
            ("postgres://db/x", "unknown scheme \"postgres\""),
            ("localhost:6379", "did you mean redis://localhost:6379/?"),
            (
                "redis+cluster://a:1,b",
                "node \"b\", which is not host:port",
            ),
            (
                "redis+cluster://a:1,,b:2",
                "node \"\", which is not host:port",
            ),
            ("redis+cluster://:1", "node \":1\""),
            ("redis+cluster://a:x", "node \"a:x\""),
            ("redis+cluster://a:1/0", "after its nodes"),
            ("redis+cluster:a:1", "needs `//`"),
            ("sqlite://", "names no data directory"),
        ] {
            let err = parse_default(target).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{target}: {err:?}");
            let text = err.to_string();
            assert!(text.contains(says), "{target}: {text}");
            assert!(text.contains(FORMS), "{target}: {text}");
        }
    }

    #[test]
    fn an_error_hides_the_password() {
        for (target, shown) in [
            (
                "redis+cluster://u:hunter2@a:1,b",
                "redis+cluster://***@a:1,b",
            ),
            ("redis:hunter2@h", "redis:***@h"),
            ("postgres://u:hunter2@db/x", "postgres://***@db/x"),
        ] {
            let text = parse_default(target).unwrap_err().to_string();
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains(shown), "{text}");
        }
    }
}

//! A cleaning pass that knows no earlier visit: the old fields of a batch
//! of hashes, read from their DUMP payloads (HKEYS where a payload is not
//! a listpack) and picked in Rust, and removed by name.

use redis::Value as Reply;

use super::super::dump;
use super::RedisSliceStore;
use super::clean::{CleanEntry, Trim};
use crate::error::{Error, Result};

impl RedisSliceStore {
    /// A pass that knows no earlier visit: reads the fields of every hash
    /// of `entries` due up to a cutoff and names those at or before it.
    /// Reading is one pipeline of DUMP (every hash of a batch is in its
    /// registry's slot), each payload parsed here ([`super::dump`]); a hash
    /// whose payload is not a listpack is read again with HKEYS (a second
    /// round trip, only then). Comparing in Rust spares the server a string
    /// per field kept.
    ///
    /// Returns what to remove: entries whose hashes keep a field (read
    /// here) cannot be dropped, so their old fields go by plain HDEL
    /// ([`OldFields::direct`]); the others go through the clean call, which
    /// drops an entry only if its hashes are all empty inside it
    /// ([`OldFields::scripted`]). Entries with nothing to remove that
    /// cannot be dropped are left out.
    pub(super) async fn read_old(
        &self,
        entries: Vec<CleanEntry>,
        book_rule: bool,
    ) -> Result<OldFields> {
        let read: Vec<&str> = entries
            .iter()
            .flat_map(|e| &e.hashes)
            .filter(|(_, t)| t.as_ref().is_some_and(|t| t.old_field().is_some()))
            .map(|(key, _)| key.as_str())
            .collect();
        // The compact layout names its one hash at every precision, one
        // after the other: each hash is asked for once.
        let mut unique: Vec<&str> = Vec::with_capacity(read.len());
        let mut at: Vec<usize> = Vec::with_capacity(read.len());
        for key in read {
            if unique.last() != Some(&key) {
                unique.push(key);
            }
            at.push(unique.len() - 1);
        }
        let read = self.hash_fields(&unique).await?;
        let mut fields = at.into_iter().map(|i| &read[i]);
        let mut old = OldFields::default();
        for mut entry in entries {
            let mut removes = false;
            // Per hash read, its fields and those gone (the compact layout
            // reads its one hash once per precision, each naming its own).
            let mut counts: Vec<(String, usize, usize)> = Vec::new();
            for (key, trim) in &mut entry.hashes {
                let old = match trim {
                    Some(t @ (Trim::Upto(_) | Trim::Within(..))) => t.old_field(),
                    _ => continue,
                };
                let Some(old) = old else {
                    // A negative cutoff: nothing is old.
                    *trim = None;
                    continue;
                };
                let all = fields.next().ok_or_else(|| {
                    Error::Backend("redis answered fewer replies than asked".into())
                })?;
                let total = all.len();
                let gone: Vec<Vec<u8>> = all.iter().filter(|f| old(f)).cloned().collect();
                match counts.iter_mut().find(|(k, _, _)| k == key) {
                    Some((_, _, n)) => *n += gone.len(),
                    None => counts.push((key.clone(), total, gone.len())),
                }
                removes |= !gone.is_empty();
                *trim = (!gone.is_empty()).then_some(Trim::Fields(gone));
            }
            let kept = counts.iter().any(|(_, total, gone)| gone < total);
            let windows = entry
                .hashes
                .iter()
                .any(|(_, t)| matches!(t, Some(Trim::Slices(_))));
            if kept && !windows {
                // A field stays: the entry stays registered whatever else
                // happens, so its removals need no script.
                for (key, trim) in entry.hashes {
                    if let Some(Trim::Fields(gone)) = trim {
                        old.direct.push((key, gone));
                    }
                }
            } else if removes || windows || (!book_rule && !kept) {
                old.scripted.push(entry);
            }
        }
        Ok(old)
    }

    /// The field names of each hash of `keys` (none for a missing key), in
    /// order: one pipeline of DUMP, then HKEYS for those whose payload is
    /// not a listpack (every key, when the server refuses DUMP).
    async fn hash_fields(&self, keys: &[&str]) -> Result<Vec<Vec<Vec<u8>>>> {
        let pipeline = |command: &str, keys: &mut dyn Iterator<Item = &str>| {
            let mut pipe = redis::pipe();
            for key in keys {
                pipe.cmd(command).arg(key);
            }
            pipe
        };
        // A server that refuses DUMP (an ACL without it) is read with
        // HKEYS; a fault shows again there.
        let replies = match self
            .redis
            .run_pipelines(vec![pipeline("DUMP", &mut keys.iter().copied())])
            .await
        {
            Ok(mut replies) => replies.pop().unwrap_or_default(),
            Err(e) => {
                tracing::debug!(error = %e, "DUMP refused; reading fields with HKEYS");
                vec![Reply::Okay; keys.len()]
            }
        };
        if replies.len() != keys.len() {
            return Err(Error::Backend(
                "redis answered fewer replies than asked".into(),
            ));
        }
        let mut out: Vec<Option<Vec<Vec<u8>>>> = replies
            .iter()
            .map(|reply| match reply {
                Reply::Nil => Some(Vec::new()),
                Reply::BulkString(payload) => dump::hash_fields(payload),
                _ => None,
            })
            .collect();
        let again: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
        if !again.is_empty() {
            let replies = self
                .redis
                .run_pipelines(vec![pipeline("HKEYS", &mut again.iter().map(|&i| keys[i]))])
                .await?
                .pop()
                .unwrap_or_default();
            for (&i, reply) in again.iter().zip(replies) {
                let fields = match reply {
                    Reply::Array(f) | Reply::Set(f) => f,
                    other => {
                        return Err(Error::Corrupt(format!(
                            "{}: HKEYS answered {other:?}, not its fields",
                            keys[i]
                        )));
                    }
                };
                out[i] = Some(
                    fields
                        .into_iter()
                        .filter_map(|f| match f {
                            Reply::BulkString(b) => Some(b),
                            _ => None,
                        })
                        .collect(),
                );
            }
        }
        out.into_iter()
            .map(|f| {
                f.ok_or_else(|| Error::Backend("redis answered fewer replies than asked".into()))
            })
            .collect()
    }

    /// Removes each hash's fields by name: one pipeline of HDEL. Returns
    /// the fields removed.
    pub(super) async fn remove_fields(&self, hashes: &[(String, Vec<Vec<u8>>)]) -> Result<u64> {
        let mut pipe = redis::pipe();
        for (key, fields) in hashes {
            for chunk in fields.chunks(1000) {
                pipe.cmd("HDEL").arg(key.as_str()).arg(chunk);
            }
        }
        let replies = self
            .redis
            .run_pipelines(vec![pipe])
            .await?
            .pop()
            .unwrap_or_default();
        replies
            .into_iter()
            .map(|r| <u64 as redis::FromRedisValue>::from_redis_value(r).map_err(Error::from))
            .sum()
    }
}

/// The old fields a first pass read ([`RedisSliceStore::read_old`]).
#[derive(Default)]
pub(super) struct OldFields {
    /// Entries for the clean call (which may drop them).
    pub(super) scripted: Vec<CleanEntry>,
    /// Hashes and their old fields, of entries that keep a field.
    pub(super) direct: Vec<(String, Vec<Vec<u8>>)>,
}

/// Whether a hash field is a slice starting at or before `cut` (a
/// non-negative cutoff's decimal text): a plain decimal integer, compared as
/// text (a shorter number is smaller, as the writer writes no leading
/// zeros). Any other field is never removed.
pub(super) fn at_or_before(field: &[u8], cut: &[u8]) -> bool {
    !field.is_empty()
        && field.iter().all(u8::is_ascii_digit)
        && (field.len() < cut.len() || (field.len() == cut.len() && field <= cut))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn only_plain_decimal_fields_at_or_before_the_cutoff_are_old() {
        let old = |f: &str| at_or_before(f.as_bytes(), b"1000");
        assert!(old("999") && old("1000") && old("0") && old("7"));
        assert!(!old("1001") && !old("10000") && !old("9999"));
        // Not slices: never removed, whatever their text compares to.
        for field in ["", "-5", "+5", "1e3", "99.5", " 99", "abc", "10x"] {
            assert!(!old(field), "{field:?}");
        }
    }

    /// The first pass reads fields from DUMP payloads: they name exactly
    /// what HKEYS answers, for every listpack entry encoding, compressed
    /// or not; a hash in another encoding is read with HKEYS instead.
    #[tokio::test]
    async fn fields_read_from_dump_are_those_hkeys_answers() {
        let (server, store, mut conn) = listpack_server().await;
        let fields = listpack_edge_texts();
        // A hash of the shape the cleaner meets: 181 slices in a row.
        let slices: Vec<String> = (0..181).map(|k| (1_700_000_000 + k).to_string()).collect();
        let big: Vec<String> = (0..600).map(|k| k.to_string()).collect();
        // Long values stay in the listpack (12- and 32-bit string lengths);
        // 600 entries do not.
        let hashes = [("odd", &fields), ("slices", &slices), ("big", &big)];
        for compression in ["yes", "no"] {
            config_set(&mut conn, "rdbcompression", compression).await;
            let mut keys = vec!["missing"];
            for (key, fields) in hashes {
                for f in fields.iter() {
                    hset(&mut conn, key, f, 1).await;
                }
                keys.push(key);
            }
            let read = store.hash_fields(&keys).await.unwrap();
            assert_eq!(read[0], Vec::<Vec<u8>>::new());
            for (i, key) in keys.iter().enumerate().skip(1) {
                let want: Vec<Vec<u8>> = redis::cmd("HKEYS")
                    .arg(*key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(read[i], want, "{key}, compression {compression}");
                let payload = dump_payload(&mut conn, key).await;
                let parsed = dump::hash_fields(&payload);
                if *key == "big" {
                    assert_eq!(parsed, None, "a hashtable is read with HKEYS");
                } else {
                    assert_eq!(parsed, Some(want), "{key}, compression {compression}");
                }
            }
        }
        // A user whose ACL refuses DUMP reads the same fields with HKEYS.
        let _: () = redis::cmd("ACL")
            .arg(&[
                "SETUSER", "nodump", "on", "nopass", "~*", "&*", "+@all", "-dump",
            ])
            .query_async(&mut conn)
            .await
            .unwrap();
        let url = server.url().replace("redis://", "redis://nodump:x@");
        let (_, limited) = default_store(&url).await;
        let keys = ["odd", "slices", "big", "missing"];
        assert_eq!(
            limited.hash_fields(&keys).await.unwrap(),
            store.hash_fields(&keys).await.unwrap()
        );
    }
}

//! Listing: ZRANGEBYLEX per registry, merged a page at a time
//! ([`ListPage`]); the expiring layout lists through `expiring_list.lua`;
//! `contains` asks each name's registry.

use redis::Value as Reply;

use super::super::expiring;
use super::super::layout::{self, SpaceKeys};
use super::RedisSliceStore;
use super::keys::Listing;
use crate::engine::{SeriesList, Space};
use crate::error::Result;
use crate::name::Name;

impl RedisSliceStore {
    pub(super) async fn list_space(&self, list: SeriesList<'_>) -> Result<Vec<String>> {
        let keys = self.layout.space_keys(list.space);
        let queries: Vec<(String, String)> = match keys.listing() {
            Listing::Pruning => return self.list_expiring(keys, list).await,
            // The book's known: holds `<p>:<name>`: one range per precision
            // that may hold counters, merged.
            Listing::BookPrecisions => self
                .ria_prefixes()
                .await?
                .into_iter()
                .map(|p| (layout::RIA_KNOWN.to_owned(), p))
                .collect(),
            Listing::Shards => keys
                .registries()
                .into_iter()
                .map(|r| (r, String::new()))
                .collect(),
        };
        // One page of the merged ranges: a few more than `limit / ranges`
        // names from each range per round trip, then more only from the
        // ranges that filled their share, until `limit` names are known to
        // come first (names hash to shards, so one round trip is the rule).
        // Asking every range for `limit` names would read up to 64 times
        // the page.
        let mut page = ListPage::new(queries.len(), list.after, list.limit);
        while let Some(asks) = page.asks() {
            let groups = asks
                .iter()
                .map(|(i, cursor, count)| {
                    let (key, prefix) = &queries[*i];
                    let (min, max) =
                        lex_bounds(&format!("{prefix}{}", list.prefix), prefix, cursor.as_deref());
                    let mut pipe = redis::pipe();
                    pipe.add_command(zrangebylex(key, &min, &max, *count));
                    pipe
                })
                .collect();
            let values = self.redis.run_pipelines(groups).await?;
            let mut answers = Vec::with_capacity(asks.len());
            for ((i, _, _), mut group) in asks.iter().zip(values) {
                let prefix = &queries[*i].1;
                let members: Vec<String> =
                    redis::FromRedisValue::from_redis_value(group.remove(0))?;
                answers.push(
                    members
                        .into_iter()
                        .map(|m| m[prefix.len()..].to_owned())
                        .collect(),
                );
            }
            page.answer(answers);
        }
        Ok(page.names())
    }

    pub(super) async fn contains_names(&self, space: &Space, names: &[Name]) -> Result<Vec<bool>> {
        let keys = self.layout.space_keys(space);
        if !keys.scores_names() {
            return crate::engine::contains_by_listing(self, space, names).await;
        }
        let groups = names
            .iter()
            .map(|name| {
                let mut pipe = redis::pipe();
                pipe.cmd("ZSCORE")
                    .arg(keys.registry(keys.shard(name.as_str())))
                    .arg(name.as_str());
                pipe
            })
            .collect();
        let values = self.redis.run_pipelines(groups).await?;
        Ok(values
            .iter()
            .map(|v| !matches!(v.first(), None | Some(Reply::Nil)))
            .collect())
    }

    /// Lists the expiring layout's series: one `expiring_list.lua` call
    /// per shard (concurrent), which first forgets the series that expired.
    async fn list_expiring(&self, keys: SpaceKeys<'_>, list: SeriesList<'_>) -> Result<Vec<String>> {
        let (min, max) = lex_bounds(list.prefix, "", list.after);
        let below = expiring::prune_below(self.clock.now());
        let calls = (0..layout::SHARDS).map(|shard| {
            let mut invocation = self.list.prepare_invoke();
            invocation
                .key(keys.registry(shard))
                .key(keys.ends(shard))
                .arg(&min)
                .arg(&max)
                .arg(list.limit)
                .arg(below);
            let mut handle = self.redis.handle();
            async move { invocation.invoke_async::<Vec<String>>(&mut handle).await }
        });
        let mut names = Vec::new();
        for found in futures::future::try_join_all(calls).await? {
            names.extend(found);
        }
        names.sort_unstable();
        names.truncate(list.limit);
        Ok(names)
    }

    /// The `<p>:` prefixes present in the book's `known:`: one ZRANGEBYLEX
    /// hop per distinct precision, so counters written with precisions Tally
    /// was not configured with are listed too.
    async fn ria_prefixes(&self) -> Result<Vec<String>> {
        let mut prefixes = Vec::new();
        let mut min = "-".to_owned();
        loop {
            let first: Vec<String> = redis::cmd("ZRANGEBYLEX")
                .arg(layout::RIA_KNOWN)
                .arg(&min)
                .arg("+")
                .arg("LIMIT")
                .arg(0)
                .arg(1)
                .query_async(&mut self.redis.handle())
                .await?;
            let Some(member) = first.into_iter().next() else {
                break;
            };
            let Some((p, _)) = member.split_once(':') else {
                // Not a book member; step over it.
                min = format!("({member}");
                continue;
            };
            prefixes.push(format!("{p}:"));
            min = format!("[{p};");
            if prefixes.len() > 64 {
                break;
            }
        }
        Ok(prefixes)
    }
}

/// ZRANGEBYLEX bounds for the members starting with `wanted`, strictly after
/// the member `member_prefix + after` when given (`member_prefix` is what
/// every member of the range starts with before the name: `<p>:` in the
/// book's `known:`, nothing in a shard's registry).
pub(super) fn lex_bounds(
    wanted: &str,
    member_prefix: &str,
    after: Option<&str>,
) -> (String, String) {
    let after = after.map(|a| format!("{member_prefix}{a}"));
    let min = match after {
        Some(a) if a.as_str() >= wanted => format!("({a}"),
        _ if wanted.is_empty() => "-".to_owned(),
        _ => format!("[{wanted}"),
    };
    let max = match crate::name::prefix_upper(wanted) {
        Some(upper) => format!("({upper}"),
        None => "+".to_owned(),
    };
    (min, max)
}

/// One page of a listing merged from several sorted ranges (the registry's
/// shards, or the book's per-precision ranges): what to ask each range for
/// next, and which names are known to come first. Pure: the store asks.
///
/// Each range is asked for its share of the page (a quarter more, and 8,
/// over `limit / ranges`) after its own cursor. A range answering fewer
/// than asked is exhausted; the least last name of the ranges that filled
/// their share is the watermark: every name up to it is known. Until
/// `limit` names are known, the ranges that filled their share are asked
/// again after their last name.
#[derive(Debug)]
struct ListPage {
    cursors: Vec<Option<String>>,
    done: Vec<bool>,
    per: usize,
    limit: usize,
    names: Vec<String>,
    known: Option<usize>,
}

impl ListPage {
    fn new(ranges: usize, after: Option<&str>, limit: usize) -> Self {
        let per = if ranges <= 1 {
            limit
        } else {
            ((limit + limit / 4) / ranges + 8).min(limit)
        };
        ListPage {
            cursors: vec![after.map(str::to_owned); ranges],
            done: vec![limit == 0; ranges],
            per: per.max(1),
            limit,
            names: Vec::new(),
            known: (limit == 0 || ranges == 0).then_some(0),
        }
    }

    /// The next asks: (range, cursor, count) for every range not exhausted;
    /// `None` once the page is known.
    fn asks(&self) -> Option<Vec<(usize, Option<String>, usize)>> {
        if self.known.is_some() {
            return None;
        }
        Some(
            (0..self.cursors.len())
                .filter(|&i| !self.done[i])
                .map(|i| (i, self.cursors[i].clone(), self.per))
                .collect(),
        )
    }

    /// The answers to the last asks, in their order, each sorted.
    fn answer(&mut self, answers: Vec<Vec<String>>) {
        let asked: Vec<usize> = (0..self.cursors.len()).filter(|&i| !self.done[i]).collect();
        let mut watermark: Option<String> = None;
        for (i, names) in asked.into_iter().zip(answers) {
            if names.len() < self.per {
                self.done[i] = true;
            } else if let Some(last) = names.last() {
                if watermark.as_ref().is_none_or(|w| last < w) {
                    watermark = Some(last.clone());
                }
                self.cursors[i] = Some(last.clone());
            }
            self.names.extend(names);
        }
        self.names.sort_unstable();
        self.names.dedup();
        let known = match &watermark {
            None => self.names.len(),
            Some(w) => self.names.partition_point(|n| n <= w),
        };
        if watermark.is_none() || known >= self.limit {
            self.known = Some(known.min(self.limit));
        }
    }

    /// The page, once known.
    fn names(mut self) -> Vec<String> {
        self.names.truncate(self.known.unwrap_or(0));
        self.names
    }
}

pub(super) fn zrangebylex(key: &str, min: &str, max: &str, limit: usize) -> redis::Cmd {
    let mut cmd = redis::cmd("ZRANGEBYLEX");
    cmd.arg(key)
        .arg(min)
        .arg(max)
        .arg("LIMIT")
        .arg(0)
        .arg(limit);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_pages_merge_ranges_exactly() {
        // Ranges as the store holds them; a page must be the first `limit`
        // names after the cursor of their sorted union, whatever the split.
        let page = |ranges: &[Vec<&str>], after: Option<&str>, limit: usize| {
            let mut page = ListPage::new(ranges.len(), after, limit);
            let mut rounds = 0;
            while let Some(asks) = page.asks() {
                rounds += 1;
                let answers = asks
                    .iter()
                    .map(|(i, cursor, count)| {
                        ranges[*i]
                            .iter()
                            .filter(|n| cursor.as_deref().is_none_or(|c| **n > c))
                            .take(*count)
                            .map(|n| n.to_string())
                            .collect()
                    })
                    .collect();
                page.answer(answers);
            }
            (page.names(), rounds)
        };
        let ranges = vec![
            vec!["a", "d", "g"],
            vec!["b", "e"],
            vec!["c", "f", "h", "i"],
        ];
        assert_eq!(page(&ranges, None, 3).0, ["a", "b", "c"]);
        assert_eq!(page(&ranges, Some("c"), 4).0, ["d", "e", "f", "g"]);
        assert_eq!(page(&ranges, None, 100).0.len(), 9);
        assert_eq!(page(&ranges, Some("i"), 5).0, Vec::<String>::new());
        assert_eq!(page(&ranges, None, 0).0, Vec::<String>::new());
        // Duplicates across ranges (the book's precisions) count once.
        let dup = vec![vec!["a", "b", "c"], vec!["a", "b", "c"]];
        assert_eq!(page(&dup, None, 2).0, ["a", "b"]);
        // Skewed ranges take more rounds, never a wrong page.
        let skewed: Vec<String> = (0..500).map(|i| format!("n{i:04}")).collect();
        let skewed = vec![skewed.iter().map(String::as_str).collect(), vec!["z"]];
        let (names, rounds) = page(&skewed, None, 100);
        assert_eq!(names.len(), 100);
        assert_eq!(names[99], "n0099");
        assert!(rounds > 1);
        // Names spread over 64 ranges: one round trip, and much less read
        // than 64 pages.
        let spread: Vec<Vec<String>> = (0..64)
            .map(|s| {
                (0..1000)
                    .filter(|i| i % 64 == s)
                    .map(|i| format!("n{i:04}"))
                    .collect()
            })
            .collect();
        let spread: Vec<Vec<&str>> = spread
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        let (names, rounds) = page(&spread, Some("n0100"), 500);
        assert_eq!(names.first().map(String::as_str), Some("n0101"));
        assert_eq!(names.len(), 500);
        assert_eq!(rounds, 1);
    }

    #[test]
    fn lex_bounds_select_one_prefix() {
        assert_eq!(lex_bounds("", "", None), ("-".into(), "+".into()));
        assert_eq!(lex_bounds("", "", Some("b")), ("(b".into(), "+".into()));
        assert_eq!(lex_bounds("5:", "5:", None), ("[5:".into(), "(5;".into()));
        assert_eq!(
            lex_bounds("5:", "5:", Some("hits")),
            ("(5:hits".into(), "(5;".into())
        );
        // A search within the book's 5 s members, before and after its range.
        assert_eq!(
            lex_bounds("5:ap", "5:", Some("a")),
            ("[5:ap".into(), "(5:aq".into())
        );
        assert_eq!(
            lex_bounds("5:ap", "5:", Some("apz")),
            ("(5:apz".into(), "(5:aq".into())
        );
        assert_eq!(lex_bounds("ap", "", None), ("[ap".into(), "(aq".into()));
    }
}

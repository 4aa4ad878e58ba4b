//! `/metrics/find` and `/metrics/expand` as graphite-web 1.1.10's `metrics/views.py`
//! answers them: its parameters and their errors, nodes sorted by name, one entry per name
//! (a branch before a leaf of the same name), branches then leaves (`treejson`), the
//! `completer` and `nodelist` formats, and `expand`'s sorted union.
//!
//! Owns the answers' shapes and order; listing nodes is the [`Store`]'s. Not supported: the
//! `json`, `pickle` and `msgpack` formats (they carry whisper intervals), `jsonp`, `tz`.

use crate::form::last;
use crate::json::{Json, Style};
use crate::{Answer, Error, Glob, Limits, Node, Result, Store, attime};

/// One `/metrics/find` or `/metrics/expand` request: where the nodes are, the query
/// string's and form body's pairs, the client's `Accept` and the server's limits.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) params: &'a [(String, String)],
    pub(crate) accept: Option<&'a str>,
    pub(crate) limits: &'a Limits,
}

impl<'a> Request<'a> {
    /// The last value of parameter `name`.
    fn param(&self, name: &str) -> Option<&'a str> {
        last(self.params, name)
    }

    /// `queryParamAsInt`.
    fn int(&self, name: &str, default: i64) -> Result<i64> {
        match self.param(name) {
            None => Ok(default),
            Some(v) => attime::py_int(v).ok_or_else(|| {
                Error::invalid(format!(
                    "Invalid int value {} for param {name}: invalid literal for int() with base 10: {}",
                    crate::pyfmt::repr_str(v),
                    crate::pyfmt::repr_str(v)
                ))
            }),
        }
    }

    /// `queryParamAsInt(...) != 0`, absent counting as 0.
    fn flag(&self, name: &str) -> Result<bool> {
        Ok(self.int(name, 0)? != 0)
    }

    /// `json_response_for`: `ensure_ascii` only for a client accepting exactly
    /// `application/json` (the default when no `Accept` is sent).
    fn answer(&self, value: Json) -> Answer {
        let ascii = self.accept.unwrap_or("application/json") == "application/json";
        let pretty = self.param("pretty").is_some_and(|v| !v.is_empty());
        let style = Style {
            pretty,
            ascii,
            sort_keys: false,
        };
        let content_type = if ascii {
            "application/json"
        } else {
            "application/json;charset=utf-8"
        };
        let mut answer = Answer::new(200, content_type, value.dumps(style));
        answer.headers = vec![
            ("Pragma", "no-cache".to_owned()),
            ("Cache-Control", "no-cache".to_owned()),
        ];
        answer
    }

    /// The store's nodes matching `query` (only leaves with `leaves_only`), within the
    /// find limit.
    async fn nodes(&self, query: &str, leaves_only: bool) -> Result<Vec<Node>> {
        let max_find = self.limits.max_find;
        let glob = Glob::parse(query)?;
        let limit = || {
            Error::limit(format!(
                "the query matches more than {max_find} nodes (the server's find limit, tally serve's --graphite-max-find)"
            ))
        };
        let mut nodes = match self.store.find(&glob, max_find).await {
            Ok(nodes) => nodes,
            Err(Error::Limit(_)) => return Err(limit()),
            Err(e) => return Err(e),
        };
        if nodes.len() > max_find {
            return Err(limit());
        }
        if leaves_only {
            nodes.retain(|n| n.leaf);
        }
        Ok(nodes)
    }
}

/// Python's `unquote_plus` of a node name (`+` a space, `%xx` decoded).
fn unquote_plus(name: &str) -> String {
    crate::form::parse_form(format!("x={name}").as_bytes())
        .pop()
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// `/metrics/find`.
pub(crate) async fn find(request: Request<'_>) -> Result<Answer> {
    let format = request.param("format").unwrap_or("treejson");
    let leaves_only = request.flag("leavesOnly")?;
    request.int("local", 0)?;
    let wildcards = request.flag("wildcards")?;
    // `now`, `from` and `until` are checked as graphite-web checks them, then unused (so
    // any plausible clock does to resolve relative forms).
    let clock = 1_700_000_000;
    let now = match request.param("now") {
        Some(v) => attime::parse_at_time(v, clock).map_err(|e| {
            Error::invalid(format!(
                "Invalid value {} for param now: {e}",
                crate::pyfmt::repr_str(v)
            ))
        })?,
        None => clock,
    };
    for name in ["from", "until"] {
        if let Some(v) = request.param(name)
            && v != "-1"
        {
            attime::parse_at_time(v, now).map_err(|e| {
                Error::invalid(format!(
                    "Invalid value {} for param {name}: {e}",
                    crate::pyfmt::repr_str(v)
                ))
            })?;
        }
    }
    let position = request.int("position", -1)?;
    let automatic_variants = request.flag("automatic_variants")?;
    let Some(query) = request.param("query") else {
        return Err(Error::invalid("Missing required parameter 'query'"));
    };
    if query.is_empty() {
        return Err(Error::invalid("Required parameter 'query' is empty"));
    }
    let base_path = match query.rfind('.') {
        Some(at) => format!("{}.", &query[..at]),
        None => String::new(),
    };
    let mut query = query.to_owned();
    if format == "completer" {
        query = query.replace("..", "*.");
        if !query.ends_with('*') {
            query.push('*');
        }
        if automatic_variants {
            query = query
                .split('.')
                .map(|part| {
                    if part.contains(',') && !part.contains('{') {
                        format!("{{{part}}}")
                    } else {
                        part.to_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join(".");
        }
    }
    if !matches!(format, "treejson" | "nodelist" | "completer") {
        let mut answer = Answer::new(
            400,
            "text/plain",
            if matches!(format, "json" | "pickle" | "msgpack") {
                format!(
                    "Invalid value for 'format' parameter: {format} is not supported by this server (treejson, completer, nodelist)"
                )
            } else {
                "Invalid value for 'format' parameter".to_owned()
            },
        );
        answer.headers.clear();
        return Ok(answer);
    }
    let mut nodes = request.nodes(&query, leaves_only).await?;
    // Sorted by name; of one name, a branch first (as graphite-web lists a path's branch
    // before its leaf).
    nodes.sort_by(|a, b| a.name().cmp(b.name()).then(a.leaf.cmp(&b.leaf)));
    let body = match format {
        "treejson" => tree_json(&nodes, &base_path, wildcards),
        "nodelist" => {
            let mut found: Vec<String> = Vec::new();
            for node in &nodes {
                let parts: Vec<&str> = node.path.split('.').collect();
                let index = if position < 0 {
                    parts.len() as i64 + position
                } else {
                    position
                };
                let Some(part) = usize::try_from(index).ok().and_then(|i| parts.get(i)) else {
                    return Err(Error::invalid(format!(
                        "position {position} is past the nodes of {}",
                        node.path
                    )));
                };
                found.push((*part).to_owned());
            }
            found.sort();
            found.dedup();
            Json::Object(vec![(
                "nodes".to_owned(),
                Json::Array(found.into_iter().map(Json::Str).collect()),
            )])
        }
        _ => {
            let mut results: Vec<Json> = nodes
                .iter()
                .map(|node| {
                    let mut path = node.path.clone();
                    if !node.leaf {
                        path.push('.');
                    }
                    Json::Object(vec![
                        ("path".to_owned(), Json::Str(path)),
                        ("name".to_owned(), Json::str(node.name())),
                        (
                            "is_leaf".to_owned(),
                            Json::str(if node.leaf { "1" } else { "0" }),
                        ),
                    ])
                })
                .collect();
            if results.len() > 1 && wildcards {
                results.push(Json::Object(vec![("name".to_owned(), Json::str("*"))]));
            }
            Json::Object(vec![("metrics".to_owned(), Json::Array(results))])
        }
    };
    Ok(request.answer(body))
}

/// `tree_json`.
fn tree_json(nodes: &[Node], base_path: &str, wildcards: bool) -> Json {
    let kind = |leaf: bool| {
        let flag = |b: bool| Json::Int(b as i64);
        vec![
            ("allowChildren".to_owned(), flag(!leaf)),
            ("expandable".to_owned(), flag(!leaf)),
            ("leaf".to_owned(), flag(leaf)),
        ]
    };
    let mut results = Vec::new();
    if nodes.len() > 1 && wildcards {
        let mut node = vec![
            ("text".to_owned(), Json::str("*")),
            ("id".to_owned(), Json::Str(format!("{base_path}*"))),
        ];
        node.extend(kind(nodes.iter().all(|n| n.leaf)));
        results.push(Json::Object(node));
    }
    let mut seen = std::collections::HashSet::new();
    let (mut branches, mut leaves) = (Vec::new(), Vec::new());
    for node in nodes {
        if !seen.insert(node.name()) {
            continue;
        }
        let mut entry = vec![
            ("text".to_owned(), Json::Str(unquote_plus(node.name()))),
            (
                "id".to_owned(),
                Json::Str(format!("{base_path}{}", node.name())),
            ),
        ];
        entry.extend(kind(node.leaf));
        if node.leaf {
            leaves.push(Json::Object(entry));
        } else {
            branches.push(Json::Object(entry));
        }
    }
    results.extend(branches);
    results.extend(leaves);
    Json::Array(results)
}

/// `/metrics/expand`.
pub(crate) async fn expand(request: Request<'_>) -> Result<Answer> {
    request.int("local", 0)?;
    let group_by_expr = request.flag("groupByExpr")?;
    let leaves_only = request.flag("leavesOnly")?;
    let mut by_query: Vec<(String, Vec<String>)> = Vec::new();
    for (key, query) in request.params {
        if key != "query" {
            continue;
        }
        let nodes = request.nodes(query, false).await?;
        let mut paths: Vec<String> = nodes
            .into_iter()
            .filter(|n| n.leaf || !leaves_only)
            .map(|n| n.path)
            .collect();
        paths.sort();
        paths.dedup();
        match by_query.iter_mut().find(|(q, _)| q == query) {
            Some(slot) => slot.1 = paths,
            None => by_query.push((query.clone(), paths)),
        }
    }
    let results = if group_by_expr {
        Json::Object(
            by_query
                .into_iter()
                .map(|(q, paths)| (q, Json::Array(paths.into_iter().map(Json::Str).collect())))
                .collect(),
        )
    } else {
        let mut all: Vec<String> = by_query.into_iter().flat_map(|(_, p)| p).collect();
        all.sort();
        all.dedup();
        Json::Array(all.into_iter().map(Json::Str).collect())
    };
    Ok(request.answer(Json::Object(vec![("results".to_owned(), results)])))
}

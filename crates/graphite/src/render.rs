//! `/render` as graphite-web 1.1.10's `render/views.py` answers it in JSON and CSV: its
//! options (`target`, `from`, `until`, `now`, `format`, `maxDataPoints`, `noNullPoints`,
//! `xFilesFactor`, `template[...]`, `pretty`), the time range, evaluation, `maxDataPoints`
//! consolidation with its nudge, and the exact text of both formats; and `/functions`.
//!
//! Owns request options and output. Other formats (PNG, graphite-web's default, SVG, PDF,
//! pickle, ...) are refused with a 400 naming the two offered; `tz` other than UTC and
//! `jsonp` are not supported (UTC is graphite-web's default zone).

use crate::form::last;
use crate::functions::eval::{Evaluation, TimeRange};
use crate::functions::{Registry, Value};
use crate::json::{Json, Style};
use crate::{Answer, Error, Expr, Limits, Result, Series, Store, attime};

/// The formats this server renders.
pub(crate) const FORMATS: &str = "json, csv";

fn has(params: &[(String, String)], name: &str) -> bool {
    params.iter().any(|(k, _)| k == name)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

pub(crate) async fn render(
    registry: &Registry,
    store: &dyn Store,
    params: &[(String, String)],
    clock: i64,
    limits: &Limits,
) -> Result<Answer> {
    // parseOptions: any failure is an InputParameterError of its message.
    let graph_type = last(params, "graphType").unwrap_or("line");
    if graph_type != "line" && graph_type != "pie" {
        return Err(Error::invalid(format!(
            "Invalid graphType '{graph_type}', must be one of ['line', 'pie']"
        )));
    }
    let mut targets: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "target")
        .map(|(_, v)| v.clone())
        .collect();
    if targets.is_empty() {
        targets = params
            .iter()
            .filter(|(k, _)| k == "target[]")
            .map(|(_, v)| v.clone())
            .collect();
    }
    let mut template: Vec<(String, String)> = Vec::new();
    for (key, value) in params {
        if let Some(name) = key.strip_prefix("template[") {
            let name: String = name
                .chars()
                .take(name.chars().count().saturating_sub(1))
                .collect();
            match template.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value.clone(),
                None => template.push((name, value.clone())),
            }
        }
    }
    let mut format = None;
    if has(params, "pickle") {
        format = Some("pickle");
    }
    if has(params, "rawData") {
        format = Some("raw");
    }
    if let Some(f) = last(params, "format") {
        format = Some(f);
    }
    let format = match (graph_type, format) {
        ("line", Some("json")) => Format::Json,
        ("line", Some("csv")) => Format::Csv,
        (_, other) => {
            return Err(Error::invalid(format!(
                "format {} is not supported by this server; it renders format={}",
                crate::pyfmt::repr_str(other.unwrap_or("png")),
                FORMATS.replace(", ", " or format=")
            )));
        }
    };
    let pretty = last(params, "pretty").is_some_and(|v| !v.is_empty());
    let max_data_points = match last(params, "maxDataPoints") {
        Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
            match v.parse::<usize>() {
                Ok(0) => {
                    return Err(Error::invalid("maxDataPoints must be at least 1"));
                }
                Ok(n) => Some(n),
                Err(_) => Some(usize::MAX),
            }
        }
        _ => None,
    };
    let no_null_points = has(params, "noNullPoints");
    let cache_timeout = py_param(
        params,
        "cacheTimeout",
        DEFAULT_CACHE_DURATION,
        attime::py_int,
        "invalid literal for int() with base 10",
    )?;
    let no_cache = has(params, "noCache") || cache_timeout == 0;
    let now = match last(params, "now") {
        Some(v) => attime::parse_at_time(v, clock).map_err(Error::invalid)?,
        None => clock,
    };
    let until = match last(params, "until") {
        Some(v) => attime::parse_at_time(v, now).map_err(Error::invalid)?,
        None => now,
    };
    let from = match last(params, "from") {
        Some(v) => attime::parse_at_time(v, now).map_err(Error::invalid)?,
        None => attime::parse_at_time("-1d", now).map_err(Error::invalid)?,
    };
    let (start, end) = (from.min(until), from.max(until));
    if start == end {
        return Err(Error::invalid("Invalid empty time range"));
    }
    let x_files_factor = py_param(
        params,
        "xFilesFactor",
        0.0,
        attime::py_float,
        "could not convert string to float",
    )?;

    // evaluateTarget over every target.
    let mut exprs = Vec::with_capacity(targets.len());
    for target in &targets {
        if target.trim().is_empty() {
            continue;
        }
        exprs.push(Expr::parse(target)?);
    }
    let evaluation = Evaluation::new(
        registry,
        store,
        now,
        x_files_factor,
        limits,
        &targets,
        template,
    );
    let data = evaluation
        .evaluate_targets(
            &exprs,
            TimeRange {
                from: start,
                until: end,
            },
        )
        .await?;

    let body = match format {
        Format::Json => json_body(data, max_data_points, no_null_points, pretty, limits)?,
        Format::Csv => csv_body(&data, limits)?,
    };
    let content_type = match format {
        Format::Json => "application/json",
        Format::Csv => "text/csv",
    };
    let mut answer = Answer::new(200, content_type, body);
    answer.headers = cache_headers(no_cache, cache_timeout, clock);
    Ok(answer)
}

/// graphite-web's default `cacheTimeout` (its `DEFAULT_CACHE_DURATION`).
const DEFAULT_CACHE_DURATION: i64 = 60;

/// The headers Django's `patch_response_headers` (or `add_never_cache_headers` for
/// `noCache` and a zero timeout) puts on a render answer.
fn cache_headers(no_cache: bool, timeout: i64, clock: i64) -> Vec<(&'static str, String)> {
    if no_cache {
        return vec![
            ("Expires", http_date(clock)),
            (
                "Cache-Control",
                "max-age=0, no-cache, no-store, must-revalidate, private".to_owned(),
            ),
        ];
    }
    let timeout = timeout.max(0);
    vec![
        ("Expires", http_date(clock.saturating_add(timeout))),
        ("Cache-Control", format!("max-age={timeout}")),
    ]
}

/// An HTTP date (`Wed, 25 Nov 2026 14:07:06 GMT`).
fn http_date(t: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = attime::civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1).clamp(0, 11) as usize],
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

fn points_limit(max: usize) -> Error {
    Error::limit(format!(
        "the answer holds more than {max} datapoints (the server's points limit, tally serve's --graphite-max-points)"
    ))
}

/// `renderViewJson`.
fn json_body(
    mut data: Vec<Series>,
    max_data_points: Option<usize>,
    no_null_points: bool,
    pretty: bool,
    limits: &Limits,
) -> Result<String> {
    let mut series_out = Vec::new();
    let mut total = 0usize;
    if data.iter().any(|s| !s.values.is_empty()) {
        let start = data.iter().map(|s| s.start).min().unwrap_or(0);
        let end = data.iter().map(|s| s.end).max().unwrap_or(0);
        let time_range = end.saturating_sub(start);
        for series in &mut data {
            if let Some(max) = max_data_points {
                consolidate_for(series, max, time_range)?;
            }
            let mut datapoints = series.datapoints();
            if no_null_points {
                datapoints.retain(|(v, _)| v.is_some_and(|v| !v.is_nan()));
                if datapoints.is_empty() {
                    continue;
                }
            }
            total += datapoints.len();
            if total > limits.max_points {
                return Err(points_limit(limits.max_points));
            }
            series_out.push((&*series, datapoints));
        }
    }
    let text = if pretty {
        json_tree(&series_out).dumps(Style {
            pretty,
            ..Style::DEFAULT
        })
    } else {
        json_text(&series_out, total)
    };
    // graphite-web's textual replacements, over the whole text (names included).
    let text = if text.contains("NaN,") {
        text.replace("NaN,", "null,")
    } else {
        text
    };
    Ok(if text.contains("Infinity,") {
        text.replace("Infinity,", "1e9999,")
    } else {
        text
    })
}

/// A series with the points it answers: `(value, timestamp)`.
type Rendered<'a> = (&'a Series, Vec<(Option<f64>, i64)>);

/// The answer of `renderViewJson` as a value, for the pretty form.
fn json_tree(series: &[Rendered<'_>]) -> Json {
    let out = series
        .iter()
        .map(|(series, datapoints)| {
            let tags = series
                .tags
                .iter()
                .map(|(k, v)| (k.clone(), Json::str(v.clone())))
                .collect();
            let points = datapoints
                .iter()
                .map(|&(v, t)| {
                    Json::Array(vec![v.map(Json::Float).unwrap_or(Json::Null), Json::Int(t)])
                })
                .collect();
            Json::Object(vec![
                ("target".to_owned(), Json::str(series.name.clone())),
                ("tags".to_owned(), Json::Object(tags)),
                ("datapoints".to_owned(), Json::Array(points)),
            ])
        })
        .collect();
    Json::Array(out)
}

/// [`json_tree`]'s one-line text, written straight into one buffer: the same text
/// (`json_text_is_the_tree_dumped`), without a value per point.
fn json_text(series: &[Rendered<'_>], points: usize) -> String {
    use crate::json::{write_float, write_int, write_str};
    let ascii = Style::DEFAULT.ascii;
    let mut out = String::with_capacity(2 + series.len() * 64 + points * 24);
    out.push('[');
    for (i, (series, datapoints)) in series.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str("{\"target\": ");
        write_str(&mut out, &series.name, ascii);
        out.push_str(", \"tags\": {");
        for (j, (k, v)) in series.tags.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            write_str(&mut out, k, ascii);
            out.push_str(": ");
            write_str(&mut out, v, ascii);
        }
        out.push_str("}, \"datapoints\": [");
        for (j, &(v, t)) in datapoints.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            out.push('[');
            match v {
                Some(v) => write_float(&mut out, v),
                None => out.push_str("null"),
            }
            out.push_str(", ");
            write_int(&mut out, t);
            out.push(']');
        }
        out.push_str("]}");
    }
    out.push(']');
    out
}

/// The `maxDataPoints` step of `renderViewJson` for one series: buckets of
/// `ceil(points / maxDataPoints)` values, the start nudged to a multiple of the bucket
/// (and `valuesToLose - 1` leading values dropped, as graphite-web does). A series holding
/// fewer values than that (a shifted series cut short by retention) fails there, deleting
/// past its end: a 400 here.
pub(crate) fn consolidate_for(
    series: &mut Series,
    max_data_points: usize,
    time_range: i64,
) -> Result<()> {
    if max_data_points == 1 {
        series.values_per_point = series.values.len();
        return Ok(());
    }
    if series.step <= 0 {
        return Ok(());
    }
    let number_of_points = time_range as f64 / series.step as f64;
    if (max_data_points as f64) < number_of_points {
        let values_per_point = (number_of_points / max_data_points as f64).ceil() as i64;
        let seconds_per_point = values_per_point.saturating_mul(series.step);
        if seconds_per_point <= 0 {
            return Ok(());
        }
        let nudge = seconds_per_point + series.start.rem_euclid(series.step)
            - series.start.rem_euclid(seconds_per_point);
        series.start += nudge;
        let values_to_lose = (nudge as f64 / series.step as f64) as i64;
        let drop = (values_to_lose - 1).max(0) as usize;
        if drop > series.values.len() {
            return Err(Error::invalid(format!(
                "maxDataPoints cannot consolidate {}: its first bucket drops {drop} values and \
                 it holds {} (graphite-web fails on it too)",
                series.name,
                series.values.len()
            )));
        }
        series.values.drain(..drop);
        series.values_per_point = values_per_point as usize;
    }
    Ok(())
}

/// `renderViewCsv`: `name,YYYY-mm-dd HH:MM:SS,value` lines (`\r\n`), a null as an empty
/// field, values as Python's `str()`; the name quoted as Python's csv writer quotes it.
fn csv_body(data: &[Series], limits: &Limits) -> Result<String> {
    let mut out = String::new();
    let mut total = 0usize;
    for series in data {
        let name = csv_field(&series.name);
        let points = series.points();
        total += points.len();
        if total > limits.max_points {
            return Err(points_limit(limits.max_points));
        }
        for (i, value) in points.iter().enumerate() {
            let ts = series.start + i as i64 * series.step;
            out.push_str(&name);
            out.push(',');
            out.push_str(&attime::format_datetime(ts));
            out.push(',');
            if let Some(v) = value {
                out.push_str(&crate::pyfmt::repr_f64(*v));
            }
            out.push_str("\r\n");
        }
    }
    Ok(out)
}

/// Python's csv (excel dialect, minimal quoting): quoted when holding a comma, a quote or a
/// line break; quotes doubled.
fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

/// Parameter `name` read by `parse`, `default` when absent; a value that
/// does not parse is Python's error, `what: 'value'`.
fn py_param<T>(
    params: &[(String, String)],
    name: &str,
    default: T,
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<T> {
    match last(params, name) {
        None => Ok(default),
        Some(v) => {
            parse(v).ok_or_else(|| Error::invalid(format!("{what}: {}", crate::pyfmt::repr_str(v))))
        }
    }
}

fn value_json(value: &Value) -> Json {
    match value {
        Value::Int(i) => Json::Int(*i),
        Value::Float(f) => Json::Float(*f),
        Value::Str(s) => Json::str(s.clone()),
        Value::Bool(b) => Json::Bool(*b),
        Value::None | Value::Series(_) | Value::SeriesLists(_) => Json::Null,
    }
}

/// `functionInfo` of one function.
fn function_info(registry: &Registry, f: &dyn crate::Function) -> Json {
    let sig = f.signature();
    let params = sig
        .params
        .iter()
        .map(|p| {
            let mut fields = vec![
                ("name".to_owned(), Json::str(p.name.clone())),
                ("type".to_owned(), Json::str(p.kind.name())),
            ];
            if p.required {
                fields.push(("required".to_owned(), Json::Bool(true)));
            }
            if let Some(default) = &p.default
                && *default != Value::None
            {
                fields.push(("default".to_owned(), value_json(default)));
            }
            if p.multiple {
                fields.push(("multiple".to_owned(), Json::Bool(true)));
            }
            let options = registry.options_of(p);
            if !options.is_empty() {
                fields.push((
                    "options".to_owned(),
                    Json::Array(options.iter().map(value_json).collect()),
                ));
            }
            if !p.suggestions.is_empty() {
                fields.push((
                    "suggestions".to_owned(),
                    Json::Array(p.suggestions.iter().map(value_json).collect()),
                ));
            }
            Json::Object(fields)
        })
        .collect();
    Json::Object(vec![
        ("name".to_owned(), Json::str(sig.name.clone())),
        ("function".to_owned(), Json::str(sig.function.clone())),
        ("description".to_owned(), Json::str(sig.description.clone())),
        ("module".to_owned(), Json::str(sig.module.clone())),
        ("group".to_owned(), Json::str(sig.group.clone())),
        ("params".to_owned(), Json::Array(params)),
    ])
}

/// graphite-web's `jsonResponse` with its infinity encoder.
fn functions_json(value: Json, params: &[(String, String)], status: u16) -> Answer {
    let pretty = last(params, "pretty").is_some_and(|v| !v.is_empty());
    let style = Style {
        pretty,
        ascii: true,
        sort_keys: pretty,
    };
    let text = value
        .dumps(style)
        .replace("Infinity,", "1e9999,")
        .replace("Infinity}", "1e9999}");
    Answer::new(status, "application/json", text)
}

/// `/functions`.
pub(crate) fn functions_list(registry: &Registry, params: &[(String, String)]) -> Answer {
    let mut result: Vec<(String, Json)> = Vec::new();
    if last(params, "type") != Some("pie") {
        let grouped = matches!(
            last(params, "grouped").map(str::to_lowercase).as_deref(),
            Some("1" | "true")
        );
        let group = last(params, "group");
        for f in registry.iter() {
            let sig = f.signature();
            if group.is_some_and(|g| g != sig.group) {
                continue;
            }
            let info = function_info(registry, f.as_ref());
            if grouped {
                match result.iter_mut().find(|(g, _)| *g == sig.group) {
                    Some((_, Json::Object(members))) => members.push((sig.name.clone(), info)),
                    _ => result.push((
                        sig.group.clone(),
                        Json::Object(vec![(sig.name.clone(), info)]),
                    )),
                }
            } else {
                result.push((sig.name.clone(), info));
            }
        }
    }
    functions_json(Json::Object(result), params, 200)
}

/// `/functions/<name>`.
pub(crate) fn function_details(
    registry: &Registry,
    name: &str,
    params: &[(String, String)],
) -> Answer {
    let found = if last(params, "type") == Some("pie") {
        None
    } else {
        registry.get(name)
    };
    match found {
        Some(f) => functions_json(function_info(registry, f.as_ref()), params, 200),
        None => functions_json(
            Json::Object(vec![(
                "error".to_owned(),
                Json::str(format!("Function not found: {name}")),
            )]),
            params,
            404,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            Just(Some(f64::NAN)),
            Just(Some(f64::INFINITY)),
            Just(Some(f64::NEG_INFINITY)),
            any::<f64>().prop_map(Some),
            (-1000i64..1000).prop_map(|i| Some(i as f64)),
        ]
    }

    proptest! {
        /// The one-line answer written straight into its buffer is the answer's value
        /// dumped as `json.dumps` writes it: names and tags with quotes, escapes and
        /// non-ASCII, nulls, non-finite values, any float.
        #[test]
        fn json_text_is_the_tree_dumped(
            series in prop::collection::vec(
                (
                    "[a-z.\"\\\\é😀\u{7f}\n ]{0,12}",
                    prop::collection::btree_map("[a-zé\"]{0,4}", "[a-z;=\\\\]{0,4}", 0..3),
                    prop::collection::vec((value(), any::<i64>()), 0..6),
                ),
                0..4,
            )
        ) {
            let made: Vec<Series> = series
                .iter()
                .map(|(name, tags, _)| {
                    let mut s = Series::new(name, 0, 60, 60, vec![Some(1.0)]);
                    s.tags = tags.clone();
                    s
                })
                .collect();
            let pairs: Vec<Rendered<'_>> = made
                .iter()
                .zip(&series)
                .map(|(s, (_, _, points))| (s, points.clone()))
                .collect();
            let points = pairs.iter().map(|(_, p)| p.len()).sum();
            prop_assert_eq!(
                json_text(&pairs, points),
                json_tree(&pairs).dumps(Style::DEFAULT)
            );
        }
    }
}

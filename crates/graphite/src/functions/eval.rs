//! Evaluation of parsed targets as graphite-web 1.1.10's `evaluator.py` and `datalib.py` do:
//! every path expression of the targets extracted and fetched in one [`Store::fetch`] per
//! time range (its prefetch), each path expression's series merged, deduplicated and sorted
//! by name (`_merge_results`), calls evaluated innermost first with validated arguments, and
//! `template(...)` replacements applied to path expressions.
//!
//! Owns the request-wide evaluation state (prefetched data by time range, the series count
//! against the limit) and graphite-web's error decoration (`; targets: "..."; func: "..."`).
//! Functions themselves live in the other files of `functions/`; output formats in `render`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;

use crate::functions::{Context, Registry, Value, validate};
use crate::grammar::{Call, Expr};
use crate::{Error, Fetch, Glob, Limits, Result, Series, Store};

/// A time range being evaluated: `(from, until]` in epoch seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TimeRange {
    pub(crate) from: i64,
    pub(crate) until: i64,
}

/// `$name` replacements of a `template(...)`, in graphite-web's order (keyword values, then
/// positional ones named `1`, `2`, ..., then the request's `template[name]` parameters).
type Replacements = Vec<(String, Value)>;

/// The state of one render request's evaluation.
pub(crate) struct Evaluation<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) store: &'a dyn Store,
    pub(crate) now: i64,
    /// The request's `xFilesFactor` as `f64` bits: graphite-web's `requestContext` entry,
    /// which `setXFilesFactor` changes for whatever is evaluated after it.
    x_files_factor: AtomicU64,
    pub(crate) limits: &'a Limits,
    /// The request's targets, for error messages.
    pub(crate) targets: &'a [String],
    /// The request's `template[name]` parameters.
    pub(crate) template: Vec<(String, String)>,
    prefetched: Mutex<HashMap<TimeRange, HashMap<String, Vec<Series>>>>,
    fetched: Mutex<usize>,
    /// `stacked`'s running totals by stack name, for the whole request (graphite-web's
    /// `totalStack` in its request context).
    pub(crate) stacks: Mutex<HashMap<String, Vec<f64>>>,
}

impl<'a> Evaluation<'a> {
    pub(crate) fn new(
        registry: &'a Registry,
        store: &'a dyn Store,
        now: i64,
        x_files_factor: f64,
        limits: &'a Limits,
        targets: &'a [String],
        template: Vec<(String, String)>,
    ) -> Evaluation<'a> {
        Evaluation {
            registry,
            store,
            now,
            x_files_factor: AtomicU64::new(x_files_factor.to_bits()),
            limits,
            targets,
            template,
            prefetched: Mutex::new(HashMap::new()),
            fetched: Mutex::new(0),
            stacks: Mutex::new(HashMap::new()),
        }
    }

    /// The request's `xFilesFactor` now: the request's own, or the last `setXFilesFactor`
    /// evaluated.
    pub(crate) fn x_files_factor(&self) -> f64 {
        f64::from_bits(self.x_files_factor.load(Ordering::Relaxed))
    }

    /// graphite-web's `requestContext['xFilesFactor'] = ...`: series fetched and made from
    /// now on in this request take `value`.
    pub(crate) fn set_x_files_factor(&self, value: f64) {
        self.x_files_factor
            .store(value.to_bits(), Ordering::Relaxed);
    }

    /// `evaluateTarget`: prefetch every path expression of `exprs` over `range`, then
    /// evaluate each into series.
    pub(crate) async fn evaluate_targets(
        &self,
        exprs: &[Expr],
        range: TimeRange,
    ) -> Result<Vec<Series>> {
        let mut patterns = Vec::new();
        for expr in exprs {
            self.extract_paths(expr, None, &mut patterns);
        }
        self.prefetch(patterns, range).await?;
        let mut out = Vec::new();
        for expr in exprs {
            match self.eval(expr, range, None).await? {
                Value::Series(list) => out.extend(list),
                Value::None => {}
                other => {
                    return Err(self.decorate(
                        Error::invalid(format!(
                            "target evaluates to {} instead of a series list",
                            other.repr()
                        )),
                        None,
                    ));
                }
            }
        }
        Ok(out)
    }

    /// `extractPathExpressions`: path expressions of the expression and of its calls'
    /// positional arguments (graphite-web does not look into keyword arguments).
    fn extract_paths(
        &self,
        expr: &Expr,
        replacements: Option<&Replacements>,
        out: &mut Vec<String>,
    ) {
        match expr {
            Expr::Template(t) => {
                let replacements = self.template_replacements(&t.args, &t.kwargs);
                self.extract_paths(&t.expr, Some(&replacements), out);
            }
            Expr::Path(path) => {
                let mut expression = path.clone();
                if let Some(replacements) = replacements {
                    for (name, value) in replacements {
                        let key = format!("${name}");
                        if expression != key {
                            expression = expression.replace(&key, &value.to_py_str());
                        }
                    }
                }
                out.push(expression);
            }
            Expr::Call(call) => {
                for arg in &call.args {
                    self.extract_paths(arg, replacements, out);
                }
            }
            _ => {}
        }
    }

    fn template_replacements(&self, args: &[Expr], kwargs: &[(String, Expr)]) -> Replacements {
        let mut replacements: Replacements = Vec::new();
        let mut set =
            |name: String, value: Value| match replacements.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = value,
                None => replacements.push((name, value)),
            };
        for (name, expr) in kwargs {
            set(name.clone(), scalar(expr));
        }
        for (i, expr) in args.iter().enumerate() {
            set((i + 1).to_string(), scalar(expr));
        }
        for (name, value) in &self.template {
            set(name.clone(), Value::Str(value.clone()));
        }
        replacements
    }

    /// `prefetchData`: one store read for every distinct pattern over `range`.
    async fn prefetch(&self, patterns: Vec<String>, range: TimeRange) -> Result<()> {
        let mut patterns = patterns;
        patterns.sort();
        patterns.dedup();
        if patterns.is_empty() {
            return Ok(());
        }
        let globs = patterns
            .iter()
            .map(|p| Glob::parse(p))
            .collect::<Result<Vec<_>>>()?;
        let used = *self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        let budget = self.limits.max_series.saturating_sub(used);
        let results = match self
            .store
            .fetch(Fetch {
                patterns: &globs,
                from: range.from,
                until: range.until,
                now: self.now,
                max_series: budget,
            })
            .await
        {
            Ok(results) => results,
            // The store's own words for the limit give way to the request's.
            Err(Error::Limit(_)) => return Err(series_limit(self.limits.max_series)),
            Err(e) => return Err(e),
        };
        let count: usize = results.iter().map(Vec::len).sum();
        {
            let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
            *fetched += count;
            if *fetched > self.limits.max_series {
                return Err(series_limit(self.limits.max_series));
            }
        }
        let mut prefetched = self.prefetched.lock().unwrap_or_else(|e| e.into_inner());
        let entry = prefetched.entry(range).or_default();
        for (pattern, series) in patterns.into_iter().zip(results) {
            if !series.is_empty() {
                entry.insert(pattern, series);
            }
        }
        Ok(())
    }

    /// `fetchData` + `_merge_results` with graphite-web's default
    /// `REMOTE_STORE_MERGE_RESULTS = True`: a path expression's prefetched series, one per
    /// name, sorted by name. Of series sharing a name the first fetched is kept; while it
    /// has a null, a later twin of as many points fills its nulls, and a later twin of
    /// another length (and any points) replaces it (graphite-web counts no candidate's
    /// nulls under that setting).
    fn fetch_data(&self, pattern: &str, range: TimeRange) -> Vec<Series> {
        let prefetched = self.prefetched.lock().unwrap_or_else(|e| e.into_inner());
        let Some(found) = prefetched.get(&range).and_then(|m| m.get(pattern)) else {
            return Vec::new();
        };
        let mut by_name: HashMap<String, (Series, usize)> = HashMap::new();
        for fetched in found {
            let mut series = fetched.clone();
            series.path_expression = pattern.to_owned();
            series.x_files_factor = self.x_files_factor();
            match by_name.get_mut(&series.name) {
                None => {
                    let nones = series.values.iter().filter(|v| v.is_none()).count();
                    by_name.insert(series.name.clone(), (series, nones));
                }
                Some((known, known_nones)) => {
                    if *known_nones > 0 && !series.values.is_empty() {
                        if series.values.len() == known.values.len() {
                            for (k, v) in known.values.iter_mut().zip(&series.values) {
                                if k.is_none() && v.is_some() {
                                    *k = *v;
                                    *known_nones -= 1;
                                }
                            }
                        } else {
                            *known = series;
                            // graphite-web caches the candidate's count, 0 under the setting.
                            *known_nones = 0;
                        }
                    }
                }
            }
        }
        let mut list: Vec<Series> = by_name.into_values().map(|(s, _)| s).collect();
        list.sort_by(|a, b| a.name.cmp(&b.name));
        list
    }

    /// `evaluateTokens`.
    fn eval<'b>(
        &'b self,
        expr: &'b Expr,
        range: TimeRange,
        replacements: Option<&'b Replacements>,
    ) -> BoxFuture<'b, Result<Value>> {
        Box::pin(async move {
            match expr {
                Expr::Template(t) => {
                    let replacements = self.template_replacements(&t.args, &t.kwargs);
                    self.eval(&t.expr, range, Some(&replacements)).await
                }
                Expr::Path(path) => {
                    let mut expression = path.clone();
                    if let Some(replacements) = replacements {
                        for (name, value) in replacements {
                            let key = format!("${name}");
                            if expression == key {
                                return Ok(match value {
                                    Value::Str(s) if is_decimalish(s) => {
                                        Value::Float(s.parse().unwrap_or(f64::NAN))
                                    }
                                    other => other.clone(),
                                });
                            }
                            expression = expression.replace(&key, &value.to_py_str());
                        }
                    }
                    Ok(Value::Series(self.fetch_data(&expression, range)))
                }
                Expr::Call(call) => self.eval_call(call, range, replacements).await,
                other => Ok(scalar(other)),
            }
        })
    }

    async fn eval_call(
        &self,
        call: &Call,
        range: TimeRange,
        replacements: Option<&Replacements>,
    ) -> Result<Value> {
        if call.name == "template" {
            return Err(self.decorate(
                Error::invalid(
                    "invalid template() syntax, only string/numeric arguments are allowed",
                ),
                None,
            ));
        }
        let Some(function) = self.registry.get(&call.name) else {
            return Err(self.decorate(
                Error::invalid(format!(
                    "Received request for unknown function: {}",
                    call.name
                )),
                None,
            ));
        };
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            args.push(self.eval(arg, range, replacements).await?);
        }
        let mut kwargs = Vec::with_capacity(call.kwargs.len());
        for (name, arg) in &call.kwargs {
            kwargs.push((name.clone(), self.eval(arg, range, replacements).await?));
        }
        let signature = function.signature();
        let described = describe_call(
            &call.name,
            &args.iter().collect::<Vec<_>>(),
            &kwargs
                .iter()
                .map(|(k, v)| (k.as_str(), v))
                .collect::<Vec<_>>(),
        );
        let positional = args.len();
        let keywords: Vec<String> = kwargs.iter().map(|(k, _)| k.clone()).collect();
        let validated = match validate(self.registry, signature, args, kwargs) {
            Ok(v) => v,
            Err(e) => return Err(self.decorate(e, Some(&described))),
        };
        // A function's own error shows its arguments as validation converted them (`0.0`
        // for a float parameter given `0`), as graphite-web prints them.
        let described =
            describe_validated(&call.name, signature, positional, &keywords, &validated);
        let cx = Context {
            eval: self,
            range,
            raw_args: &call.args,
        };
        match function.call(&cx, validated).await {
            Ok(value) => Ok(value),
            Err(e) => Err(self.decorate(e, Some(&described))),
        }
    }

    /// Appends `; targets: "..."` and `; func: "..."` to a 400 as graphite-web does, once.
    fn decorate(&self, error: Error, func: Option<&str>) -> Error {
        match error {
            Error::InvalidParameters(mut message) if !message.contains("; targets: \"") => {
                if !self.targets.is_empty() {
                    message.push_str(&format!("; targets: \"{}\"", self.targets.join(", ")));
                }
                if let Some(func) = func {
                    message.push_str(&format!("; func: \"{func}\""));
                }
                Error::InvalidParameters(message)
            }
            other => other,
        }
    }
}

/// The 400 for too many series.
pub(crate) fn series_limit(max: usize) -> Error {
    Error::limit(format!(
        "the request matches more than {max} series (the server's series limit, tally serve's --graphite-max-series)"
    ))
}

/// graphite-web's `func(args, k=v)` text of a call in an error message (keyword
/// arguments sorted by name), from borrowed arguments (a series list can hold every
/// point of a render: nothing is cloned to describe it).
fn describe_call(name: &str, args: &[&Value], kwargs: &[(&str, &Value)]) -> String {
    let mut keyed = kwargs.to_vec();
    keyed.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = format!("{name}(");
    let parts = args
        .iter()
        .map(|v| v.repr())
        .chain(keyed.iter().map(|(k, v)| format!("{k}={}", v.repr())));
    for (i, part) in parts.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&part);
    }
    out.push(')');
    out
}

/// [`describe_call`] of the validated arguments: the `i`-th positional argument is in its
/// parameter's slot (the last, `multiple`, one holding the rest in order), a keyword
/// argument in its parameter's.
fn describe_validated(
    name: &str,
    signature: &crate::Signature,
    positional: usize,
    keywords: &[String],
    validated: &crate::Args,
) -> String {
    let last = signature.params.len().saturating_sub(1);
    let none = Value::None;
    let args: Vec<&Value> = (0..positional)
        .map(|i| {
            let slot = i.min(last);
            let at = if slot == last { i - slot } else { 0 };
            validated.all(slot).get(at).unwrap_or(&none)
        })
        .collect();
    let mut kwargs: Vec<(&str, &Value)> = Vec::new();
    for keyword in keywords {
        if kwargs.iter().any(|(k, _)| k == keyword) {
            continue;
        }
        let value = signature
            .params
            .iter()
            .position(|p| p.name == *keyword)
            .and_then(|slot| validated.all(slot).first())
            .unwrap_or(&none);
        kwargs.push((keyword.as_str(), value));
    }
    describe_call(name, &args, &kwargs)
}

/// `evaluateScalarTokens`.
fn scalar(expr: &Expr) -> Value {
    match expr {
        Expr::Int(i) => Value::Int(*i),
        Expr::Float(f) => Value::Float(*f),
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Inf => Value::Float(f64::INFINITY),
        _ => Value::None,
    }
}

/// `re.match(r'^-?[\d.]+$', val)`.
fn is_decimalish(s: &str) -> bool {
    let body = s.strip_suffix('\n').unwrap_or(s);
    let digits = body.strip_prefix('-').unwrap_or(body);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
}

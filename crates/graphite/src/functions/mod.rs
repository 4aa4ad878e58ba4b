//! Render functions: the [`Function`] trait (built-ins and an embedder's own), their
//! `/functions` metadata ([`Signature`], [`Param`], [`ParamType`] with graphite-web's type
//! names), the argument values ([`Value`], [`Args`]), graphite-web's parameter validation
//! (`functions/params.py`, enforced) and the registry of built-ins.
//!
//! Each group of built-ins has its own file (`combine.rs`, `alias.rs`, `transform.rs`,
//! `math.rs`, `moving.rs`, `special.rs`, ...); this module owns what they share and nothing
//! of their math.

use std::collections::BTreeMap;
use std::sync::Arc;

use self::eval::{Evaluation, TimeRange};
use crate::grammar::Expr;
use crate::pyfmt::{repr_f64, repr_str};
use crate::{Error, Result, Series, Store};

pub(crate) mod agg;
pub(crate) mod alias;
pub(crate) mod combine;
pub(crate) mod eval;
pub(crate) mod filter;
pub(crate) mod forecast;
pub(crate) mod graph;
pub(crate) mod group;
pub(crate) mod higher;
pub(crate) mod math;
pub(crate) mod moving;
pub(crate) mod names;
pub(crate) mod select;
pub(crate) mod special;
pub(crate) mod time;
pub(crate) mod transform;

/// An evaluated argument, with Python's distinctions (an `int` is not a `float`).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A series list (a path expression or a function's result).
    Series(Vec<Series>),
    /// A list of series lists (`mapSeries`'s result, `reduceSeries`'s argument).
    SeriesLists(Vec<Vec<Series>>),
    /// A Python `int`.
    Int(i64),
    /// A Python `float` (`inf` included).
    Float(f64),
    /// A string (quotes removed, backslashes kept).
    Str(String),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
}

impl Value {
    /// Python's `repr()` of the value, as graphite-web's messages print arguments.
    pub fn repr(&self) -> String {
        match self {
            Value::Series(list) => list_repr(list),
            Value::SeriesLists(lists) => {
                let items: Vec<String> = lists.iter().map(|list| list_repr(list)).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Int(i) => i.to_string(),
            Value::Float(f) => repr_f64(*f),
            Value::Str(s) => repr_str(s),
            Value::Bool(true) => "True".to_owned(),
            Value::Bool(false) => "False".to_owned(),
            Value::None => "None".to_owned(),
        }
    }

    /// Python's `str()` of a scalar value (a name built with `%s`).
    pub fn to_py_str(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    /// The value as a float, for an int or a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }
}

/// Python's `repr()` of a series list.
fn list_repr(list: &[Series]) -> String {
    let items: Vec<String> = list.iter().map(series_repr).collect();
    format!("[{}]", items.join(", "))
}

fn series_repr(s: &Series) -> String {
    format!(
        "TimeSeries(name={}, start={}, end={}, step={}, valuesPerPoint={}, consolidationFunc={}, xFilesFactor={})",
        s.name,
        s.start,
        s.end,
        s.step,
        s.values_per_point,
        s.consolidation.name(),
        repr_f64(s.x_files_factor)
    )
}

/// graphite-web's parameter types (`ParamTypes`), by their `/functions` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamType {
    /// `boolean`: true/false, 0/1, `"true"`/`"false"`.
    Boolean,
    /// `date`: not validated.
    Date,
    /// `float`: a number or a numeric string.
    Float,
    /// `integer`: an int or an integer string (a float is refused).
    Integer,
    /// `interval`: a string `parseTimeOffset` accepts (`"5min"`, `"-1d"`).
    Interval,
    /// `intOrInterval`: not validated.
    IntOrInterval,
    /// `intOrInf`: an integer or infinity.
    IntOrInf,
    /// `node`: an integer.
    Node,
    /// `nodeOrTag`: not validated.
    NodeOrTag,
    /// `series`: not validated.
    Series,
    /// `seriesList`: a series list.
    SeriesList,
    /// `seriesLists`: a list of series lists.
    SeriesLists,
    /// `string`: not validated.
    String,
    /// `tag`: not validated.
    Tag,
    /// `any`: not validated.
    Any,
    /// `aggFunc`: one of the aggregation functions (`sum`, `average`, ...).
    AggFunc,
    /// `aggOrSeriesFunc`: an aggregation function or an aggregating series function.
    AggOrSeriesFunc,
}

impl ParamType {
    /// The name `/functions` prints.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Boolean => "boolean",
            ParamType::Date => "date",
            ParamType::Float => "float",
            ParamType::Integer => "integer",
            ParamType::Interval => "interval",
            ParamType::IntOrInterval => "intOrInterval",
            ParamType::IntOrInf => "intOrInf",
            ParamType::Node => "node",
            ParamType::NodeOrTag => "nodeOrTag",
            ParamType::Series => "series",
            ParamType::SeriesList => "seriesList",
            ParamType::SeriesLists => "seriesLists",
            ParamType::String => "string",
            ParamType::Tag => "tag",
            ParamType::Any => "any",
            ParamType::AggFunc => "aggFunc",
            ParamType::AggOrSeriesFunc => "aggOrSeriesFunc",
        }
    }
}

/// The aggregation functions graphite-web's `aggFuncs` and `aggFuncAliases` name.
pub const AGG_FUNCS: &[&str] = &[
    "average", "avg_zero", "median", "sum", "min", "max", "diff", "stddev", "count", "range",
    "multiply", "last", "rangeOf", "avg", "total", "current",
];

/// The required `seriesList` parameter most functions take first.
pub(crate) fn series_list() -> Param {
    Param::new("seriesList", ParamType::SeriesList).required()
}

/// One parameter of a function, as `/functions` lists it and validation checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its name (also its keyword).
    pub name: String,
    /// Its type.
    pub kind: ParamType,
    /// Whether it must be given.
    pub required: bool,
    /// The default `/functions` shows.
    pub default: Option<Value>,
    /// Whether it takes all remaining positional arguments.
    pub multiple: bool,
    /// The values allowed (besides those of its type).
    pub options: Vec<Value>,
    /// Values the function picker suggests.
    pub suggestions: Vec<Value>,
}

impl Param {
    /// An optional parameter of a type.
    pub fn new(name: &str, kind: ParamType) -> Param {
        Param {
            name: name.to_owned(),
            kind,
            required: false,
            default: None,
            multiple: false,
            options: Vec::new(),
            suggestions: Vec::new(),
        }
    }

    /// Marks it required.
    pub fn required(mut self) -> Param {
        self.required = true;
        self
    }

    /// Marks it as taking all remaining positional arguments.
    pub fn multiple(mut self) -> Param {
        self.multiple = true;
        self
    }

    /// Sets the default shown.
    pub fn default(mut self, value: Value) -> Param {
        self.default = Some(value);
        self
    }

    /// Sets the allowed string values.
    pub fn options(mut self, options: &[&str]) -> Param {
        self.options = options
            .iter()
            .map(|o| Value::Str((*o).to_owned()))
            .collect();
        self
    }

    /// Sets the suggested values.
    pub fn suggestions(mut self, suggestions: Vec<Value>) -> Param {
        self.suggestions = suggestions;
        self
    }
}

/// A function's `/functions` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// The name targets call it by.
    pub name: String,
    /// Its Python signature as graphite-web prints it, e.g. `scale(seriesList, factor)`.
    pub function: String,
    /// What it does (this project's own words).
    pub description: String,
    /// The module `/functions` names (`graphite.render.functions` for built-ins).
    pub module: String,
    /// Its group (`Combine`, `Transform`, `Alias`, `Special`, ...).
    pub group: String,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// Whether `aggOrSeriesFunc` parameters accept its name (graphite-web's `aggregator`).
    pub aggregator: bool,
}

impl Signature {
    /// A signature in graphite-web's built-in module.
    pub fn new(name: &str, function: &str, group: &str, description: &str) -> Signature {
        Signature {
            name: name.to_owned(),
            function: function.to_owned(),
            description: description.to_owned(),
            module: "graphite.render.functions".to_owned(),
            group: group.to_owned(),
            params: Vec::new(),
            aggregator: false,
        }
    }

    /// A signature in graphite-web's built-in module printed `name(args)`: how a family of
    /// functions sharing their parameters declares each member.
    pub(crate) fn with_args(name: &str, args: &str, group: &str, description: &str) -> Signature {
        Signature::new(name, &format!("{name}({args})"), group, description)
    }

    /// Sets the parameters.
    pub fn params(mut self, params: Vec<Param>) -> Signature {
        self.params = params;
        self
    }

    /// Marks the function as an aggregator.
    pub fn aggregator(mut self) -> Signature {
        self.aggregator = true;
        self
    }

    /// Sets the module name.
    pub fn module(mut self, module: &str) -> Signature {
        self.module = module.to_owned();
        self
    }
}

/// The validated arguments of a call, by parameter: positional ones in order, keyword ones
/// in their parameter's place, all remaining positional ones under a `multiple` parameter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args {
    slots: Vec<Vec<Value>>,
}

impl Args {
    /// The value of parameter `i`; `None` when absent or given as `None`.
    pub fn get(&self, i: usize) -> Option<&Value> {
        self.slots
            .get(i)
            .and_then(|v| v.first())
            .filter(|v| **v != Value::None)
    }

    /// Every value given for parameter `i` (a `multiple` parameter's list).
    pub fn all(&self, i: usize) -> &[Value] {
        self.slots.get(i).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Takes parameter `i`'s series list out (empty when absent).
    pub fn take_series(&mut self, i: usize) -> Vec<Series> {
        match self.slots.get_mut(i).and_then(|v| v.first_mut()) {
            Some(Value::Series(list)) => std::mem::take(list),
            _ => Vec::new(),
        }
    }

    /// Takes every series list given for a `multiple` parameter `i`, concatenated.
    pub fn take_all_series(&mut self, i: usize) -> Vec<Vec<Series>> {
        match self.slots.get_mut(i) {
            Some(values) => values
                .iter_mut()
                .filter_map(|v| match v {
                    Value::Series(list) => Some(std::mem::take(list)),
                    _ => None,
                })
                .collect(),
            None => Vec::new(),
        }
    }

    /// Parameter `i` as a float (an int, a float, or a string Python's `float()` reads), if
    /// given.
    pub fn f64(&self, i: usize) -> Option<f64> {
        match self.get(i)? {
            Value::Str(s) => crate::attime::py_float(s),
            other => other.as_f64(),
        }
    }

    /// Parameter `i` as an integer (an int, a bool, or an integer string), if given.
    pub fn i64(&self, i: usize) -> Option<i64> {
        match self.get(i)? {
            Value::Int(v) => Some(*v),
            Value::Bool(b) => Some(*b as i64),
            Value::Str(s) => crate::attime::py_int(s),
            Value::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(*f as i64),
            _ => None,
        }
    }

    /// Parameter `i` as a float and as given; an error saying `func` needs `what` (printing
    /// what was given) when it is not a number.
    pub(crate) fn number(&self, i: usize, func: &str, what: &str) -> Result<(f64, Value)> {
        self.needed(i, Args::f64, func, what)
    }

    /// Parameter `i` as an integer and as given; an error saying `func` needs `what`
    /// (printing what was given) when it is not an integer.
    pub(crate) fn integer(&self, i: usize, func: &str, what: &str) -> Result<(i64, Value)> {
        self.needed(i, Args::i64, func, what)
    }

    fn needed<T>(
        &self,
        i: usize,
        read: fn(&Args, usize) -> Option<T>,
        func: &str,
        what: &str,
    ) -> Result<(T, Value)> {
        let raw = self.get(i).cloned().unwrap_or(Value::None);
        match read(self, i) {
            Some(x) => Ok((x, raw)),
            None => Err(Error::invalid(format!(
                "{func} needs {what}, not {}",
                raw.repr()
            ))),
        }
    }

    /// Parameter `i` as a string, if given as one.
    pub fn str(&self, i: usize) -> Option<&str> {
        match self.get(i) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// Parameter `i` as a boolean, if given (`"true"`/`"false"` read as such).
    pub fn bool(&self, i: usize) -> Option<bool> {
        match self.get(i)? {
            Value::Bool(b) => Some(*b),
            Value::Int(i) => Some(*i != 0),
            Value::Float(f) => Some(*f != 0.0),
            Value::Str(s) => Some(s.eq_ignore_ascii_case("true")),
            Value::Series(list) => Some(!list.is_empty()),
            Value::SeriesLists(lists) => Some(!lists.is_empty()),
            Value::None => None,
        }
    }
}

/// What a function sees of the request: its time range, `now`, the store, its own
/// unevaluated arguments, and evaluation of an expression over another time range (how
/// graphite-web's moving windows and `timeShift` fetch earlier data).
pub struct Context<'a> {
    pub(crate) eval: &'a Evaluation<'a>,
    pub(crate) range: TimeRange,
    pub(crate) raw_args: &'a [Expr],
}

impl Context<'_> {
    /// The start of the range being evaluated (epoch seconds).
    pub fn from(&self) -> i64 {
        self.range.from
    }

    /// The end of the range being evaluated (epoch seconds).
    pub fn until(&self) -> i64 {
        self.range.until
    }

    /// The request's `now` (epoch seconds).
    pub fn now(&self) -> i64 {
        self.eval.now
    }

    /// The request's `xFilesFactor` (0 unless given), as the last `setXFilesFactor`
    /// evaluated left it.
    pub fn x_files_factor(&self) -> f64 {
        self.eval.x_files_factor()
    }

    /// Sets the request's `xFilesFactor` for what is evaluated after (graphite-web's
    /// `setXFilesFactor` writes it into its request context).
    pub(crate) fn set_x_files_factor(&self, value: f64) {
        self.eval.set_x_files_factor(value);
    }

    /// The store the request reads.
    pub fn store(&self) -> &dyn Store {
        self.eval.store
    }

    /// The call's arguments before evaluation (a piped-in expression first).
    pub fn raw_args(&self) -> &[Expr] {
        self.raw_args
    }

    /// Evaluates `expr` over `(from, until]` as graphite-web's `evaluateTarget` does with a
    /// copied request context: its path expressions fetched in one store read for that
    /// range, then evaluated.
    pub async fn evaluate(&self, expr: &Expr, from: i64, until: i64) -> Result<Vec<Series>> {
        self.eval
            .evaluate_targets(std::slice::from_ref(expr), TimeRange { from, until })
            .await
    }
}

/// A render function: its `/functions` entry and its call on validated arguments.
#[async_trait::async_trait]
pub trait Function: Send + Sync {
    /// Its name, parameters and description.
    fn signature(&self) -> &Signature;

    /// Calls it. `args` holds the arguments validated against the signature's parameters.
    async fn call(&self, cx: &Context<'_>, args: Args) -> Result<Value>;
}

/// A synchronous built-in's body.
pub(crate) type SyncBody = fn(&Context<'_>, Args) -> Result<Value>;

/// A built-in's call on validated arguments: a plain function, or a value that holds what
/// a family of built-ins differs in (`movingSum`'s aggregate) or that awaits more
/// evaluation (`timeShift`). [`Builtin`] gives it its signature.
#[async_trait::async_trait]
pub(crate) trait Body: Send + Sync {
    async fn call(&self, cx: &Context<'_>, args: Args) -> Result<Value>;
}

#[async_trait::async_trait]
impl<F> Body for F
where
    F: Fn(&Context<'_>, Args) -> Result<Value> + Send + Sync,
{
    async fn call(&self, cx: &Context<'_>, args: Args) -> Result<Value> {
        self(cx, args)
    }
}

/// A built-in function: its signature and body.
pub(crate) struct Builtin<B> {
    signature: Signature,
    body: B,
}

impl<B: Body + 'static> Builtin<B> {
    pub(crate) fn arc(signature: Signature, body: B) -> Arc<dyn Function> {
        Arc::new(Builtin { signature, body })
    }
}

#[async_trait::async_trait]
impl<B: Body> Function for Builtin<B> {
    fn signature(&self) -> &Signature {
        &self.signature
    }

    async fn call(&self, cx: &Context<'_>, args: Args) -> Result<Value> {
        self.body.call(cx, args).await
    }
}

/// The same function under another name (graphite-web's `sum` for `sumSeries`).
pub(crate) struct Alias {
    signature: Signature,
    target: Arc<dyn Function>,
}

impl Alias {
    pub(crate) fn arc(name: &str, target: &Arc<dyn Function>) -> Arc<dyn Function> {
        let mut signature = target.signature().clone();
        signature.function = format!(
            "{name}{}",
            &signature.function[signature.function.find('(').unwrap_or(0)..]
        );
        signature.name = name.to_owned();
        Arc::new(Alias {
            signature,
            target: target.clone(),
        })
    }
}

#[async_trait::async_trait]
impl Function for Alias {
    fn signature(&self) -> &Signature {
        &self.signature
    }

    async fn call(&self, cx: &Context<'_>, args: Args) -> Result<Value> {
        self.target.call(cx, args).await
    }
}

/// The registry: functions by name, in registration order (the order `/functions` lists).
#[derive(Clone, Default)]
pub(crate) struct Registry {
    functions: Vec<Arc<dyn Function>>,
    by_name: BTreeMap<String, usize>,
}

impl Registry {
    pub(crate) fn builtin() -> Registry {
        let mut registry = Registry::default();
        let modules = [
            combine::functions(),
            transform::functions(),
            math::functions(),
            moving::functions(),
            time::functions(),
            alias::functions(),
            special::functions(),
            group::functions(),
            filter::functions(),
            graph::functions(),
            higher::functions(),
            select::functions(),
            names::functions(),
            forecast::functions(),
        ];
        for f in modules.into_iter().flatten() {
            registry.add(f);
        }
        registry
    }

    pub(crate) fn add(&mut self, f: Arc<dyn Function>) {
        let name = f.signature().name.clone();
        match self.by_name.get(&name) {
            Some(&i) => self.functions[i] = f,
            None => {
                self.by_name.insert(name, self.functions.len());
                self.functions.push(f);
            }
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Function>> {
        self.by_name.get(name).map(|&i| &self.functions[i])
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<dyn Function>> {
        self.functions.iter()
    }

    /// The options of an `aggOrSeriesFunc` parameter: the aggregation functions and the
    /// registered aggregating functions.
    pub(crate) fn agg_or_series_options(&self) -> Vec<String> {
        let mut options: Vec<String> = AGG_FUNCS.iter().map(|s| (*s).to_owned()).collect();
        options.extend(
            self.functions
                .iter()
                .filter(|f| f.signature().aggregator)
                .map(|f| f.signature().name.clone()),
        );
        options.sort();
        options.dedup();
        options
    }

    /// The options `/functions` lists for a parameter and validation allows: its own and its
    /// type's, deduplicated and sorted by their text.
    pub(crate) fn options_of(&self, param: &Param) -> Vec<Value> {
        let mut options = param.options.clone();
        match param.kind {
            ParamType::AggFunc => {
                options.extend(AGG_FUNCS.iter().map(|s| Value::Str((*s).to_owned())))
            }
            ParamType::AggOrSeriesFunc => {
                options.extend(self.agg_or_series_options().into_iter().map(Value::Str))
            }
            _ => {}
        }
        let mut keyed: Vec<(String, Value)> =
            options.into_iter().map(|v| (v.to_py_str(), v)).collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed.dedup_by(|a, b| a.1 == b.1);
        keyed.into_iter().map(|(_, v)| v).collect()
    }
}

/// graphite-web's `validateParams` (with `ENFORCE_INPUT_VALIDATION` on): binds positional
/// and keyword arguments to parameters and checks and converts each value.
pub(crate) fn validate(
    registry: &Registry,
    sig: &Signature,
    args: Vec<Value>,
    kwargs: Vec<(String, Value)>,
) -> Result<Args> {
    let params = &sig.params;
    let func = &sig.name;
    // A dict of the keyword arguments: first position, last value.
    let mut keyed: Vec<(String, Value)> = Vec::new();
    for (k, v) in kwargs {
        match keyed.iter_mut().find(|(name, _)| *name == k) {
            Some(slot) => slot.1 = v,
            None => keyed.push((k, v)),
        }
    }
    let mut slots: Vec<Vec<Value>> = vec![Vec::new(); params.len()];
    let too_many = || {
        Error::invalid(format!(
            "Too many parameters specified for function \"{func}\""
        ))
    };
    let (args_params, kwargs_params): (usize, &[Param]) = if args.len() + keyed.len() > params.len()
    {
        if !params.last().is_some_and(|p| p.multiple) {
            return Err(too_many());
        }
        (params.len(), &[])
    } else {
        (args.len(), &params[args.len()..])
    };
    for (i, arg) in args.into_iter().enumerate() {
        let index = if i >= args_params {
            args_params.saturating_sub(1)
        } else {
            i
        };
        let Some(param) = params.get(index) else {
            return Err(too_many());
        };
        slots[index].push(validate_value(registry, param, func, arg)?);
    }
    let mut used: Vec<&str> = Vec::new();
    for param in kwargs_params {
        let value = keyed.iter().find(|(k, _)| *k == param.name).map(|(_, v)| v);
        match value {
            None | Some(Value::None) => {
                if param.required {
                    return Err(Error::invalid(format!(
                        "Missing required parameter \"{}\" for function \"{func}\"",
                        param.name
                    )));
                }
            }
            // Python cannot pass a `*args` parameter by keyword: left unexpected.
            Some(_) if param.multiple => {}
            Some(value) => {
                let index = params
                    .iter()
                    .position(|p| p.name == param.name)
                    .unwrap_or(0);
                slots[index].push(validate_value(registry, param, func, value.clone())?);
                used.push(&param.name);
            }
        }
    }
    let unexpected: Vec<&str> = keyed
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !used.contains(k))
        .collect();
    if !unexpected.is_empty() {
        return Err(Error::invalid(format!(
            "Unexpected key word arguments: {}",
            unexpected.join(", ")
        )));
    }
    Ok(Args { slots })
}

/// `Param.validateValue`: defaults, options, then the type's validator, which converts the
/// value as graphite-web's validators do (a `float` parameter given `2` gets `2.0`, an
/// `integer` one given `"3"` gets `3`). graphite-web, with its default
/// `ENFORCE_INPUT_VALIDATION = False`, only logs a value that fails and calls the function
/// with it anyway (usually failing with a 500); here such a value is a 400.
fn validate_value(registry: &Registry, param: &Param, func: &str, value: Value) -> Result<Value> {
    if value == Value::None && (param.default.is_some() || !param.required) {
        return Ok(value);
    }
    let options = registry.options_of(param);
    if !options.is_empty() && !options.iter().any(|o| py_eq(o, &value)) {
        return Err(Error::invalid(format!(
            "Invalid option specified for function \"{func}\" parameter \"{}\": {}",
            param.name,
            value.repr()
        )));
    }
    // `Some(None)`: the value is kept as it is (moved, never cloned: a series
    // list can hold every point of a render).
    let converted: Option<Option<Value>> = match (param.kind, &value) {
        (ParamType::Boolean, Value::Str(s)) => match s.to_lowercase().as_str() {
            "true" => Some(Some(Value::Bool(true))),
            "false" => Some(Some(Value::Bool(false))),
            _ => None,
        },
        (ParamType::Boolean, Value::Int(_) | Value::Float(_)) => match value.as_f64() {
            Some(0.0) => Some(Some(Value::Bool(false))),
            Some(1.0) => Some(Some(Value::Bool(true))),
            _ => None,
        },
        (ParamType::Boolean, Value::Series(list)) => Some(Some(Value::Bool(!list.is_empty()))),
        (ParamType::Boolean, Value::None) => Some(Some(Value::Bool(false))),
        (ParamType::Float, Value::Str(s)) => {
            crate::attime::py_float(s).map(|f| Some(Value::Float(f)))
        }
        (ParamType::Float, Value::Int(_) | Value::Float(_) | Value::Bool(_)) => {
            value.as_f64().map(|f| Some(Value::Float(f)))
        }
        (ParamType::Float, _) => None,
        (ParamType::Integer | ParamType::Node, _) => to_integer(&value).map(Some),
        (ParamType::IntOrInf, _) => to_integer(&value).map(Some).or_else(|| {
            let f = match &value {
                Value::Str(s) => crate::attime::py_float(s),
                other => other.as_f64(),
            };
            (f == Some(f64::INFINITY)).then_some(Some(Value::Float(f64::INFINITY)))
        }),
        (ParamType::Interval, Value::Str(s)) => {
            crate::attime::parse_offset(s).is_ok().then_some(None)
        }
        (ParamType::Interval, _) => None,
        (ParamType::SeriesList, Value::Series(_)) => Some(None),
        (ParamType::SeriesLists, Value::Series(_) | Value::SeriesLists(_)) => Some(None),
        (ParamType::SeriesList | ParamType::SeriesLists, _) => None,
        (ParamType::AggFunc, Value::Str(s)) => is_agg_func(s).then_some(None),
        (ParamType::AggFunc, _) => None,
        _ => Some(None),
    };
    match converted {
        Some(Some(converted)) => Ok(converted),
        Some(None) => Ok(value),
        None => Err(Error::invalid(format!(
            "Invalid \"{}\" value specified for function \"{func}\" parameter \"{}\": {}",
            param.kind.name(),
            param.name,
            value.repr()
        ))),
    }
}

/// An aggregation function's name, or its deprecated `<name>Series` spelling.
pub(crate) fn is_agg_func(name: &str) -> bool {
    AGG_FUNCS.contains(&name)
        || name
            .strip_suffix("Series")
            .is_some_and(|base| AGG_FUNCS.contains(&base))
}

/// `validateInteger`: an int (or bool, or integer string) as an int; a float refused.
fn to_integer(value: &Value) -> Option<Value> {
    match value {
        Value::Int(_) => Some(value.clone()),
        Value::Bool(b) => Some(Value::Int(*b as i64)),
        Value::Str(s) => crate::attime::py_int(s).map(Value::Int),
        _ => None,
    }
}

/// Python's `==` between two argument values (numbers compare across int and float).
fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Series(_) | Value::SeriesLists(_), _)
        | (_, Value::Series(_) | Value::SeriesLists(_)) => false,
        (Value::None, Value::None) => true,
        (Value::None, _) | (_, Value::None) => false,
        (Value::Str(_), _) | (_, Value::Str(_)) => false,
        (x, y) => x.as_f64() == y.as_f64(),
    }
}

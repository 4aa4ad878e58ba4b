//! Transform functions: each series' values mapped point by point (or along the series).
//!
//! Holds `scale`; the other transforms join this file.

use std::sync::Arc;

use super::{Args, Builtin, Context, Function, Param, ParamType, Signature, Value};
use crate::pyfmt::format_g;
use crate::{Error, Result};

pub(crate) fn functions() -> Vec<Arc<dyn Function>> {
    vec![Builtin::arc(
        Signature::new(
            "scale",
            "scale(seriesList, factor)",
            "Transform",
            "Multiplies every value by a constant factor (nulls stay null).",
        )
        .params(vec![
            Param::new("seriesList", ParamType::SeriesList).required(),
            Param::new("factor", ParamType::Float).required(),
        ]),
        scale,
    )]
}

fn scale(_cx: &Context<'_>, mut args: Args) -> Result<Value> {
    let factor_value = args.get(1).cloned().unwrap_or(Value::None);
    let Some(factor) = args.f64(1) else {
        return Err(Error::invalid(format!(
            "scale needs a numeric factor, not {}",
            factor_value.repr()
        )));
    };
    let mut list = args.take_series(0);
    for series in &mut list {
        series
            .tags
            .insert("scale".to_owned(), factor_value.to_py_str());
        series.name = format!("scale({},{})", series.name, format_g(factor));
        series.path_expression = series.name.clone();
        for v in series.values.iter_mut().flatten() {
            *v *= factor;
        }
    }
    Ok(Value::Series(list))
}

//! The API document's constraints, checked field by field before a handler
//! calls the library.
//!
//! `openapi.json` states every constraint a request must meet: types and
//! nullability (serde enforces those while parsing, with [`not_null`] for
//! optional fields the document does not let be null), name rules, ranges,
//! array sizes. The handlers check the rest here, naming the field in the
//! 400 answer, so that whatever the library still refuses afterwards is a
//! rule the document can only state in words, answered 422
//! ([`super::ApiError::refused`]). The checks reuse the library's own
//! validators ([`Name::check`], [`Timestamp::from_secs_f64`]) so the two
//! cannot disagree; the library checks again, as it does for every caller.
//!
//! Not here: rules that depend on stored data or on the clock (an overflow,
//! a time too far ahead), which only the library can judge.

use std::fmt::{self, Display};
use std::marker::PhantomData;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use super::{ApiError, ServerSettings};
use crate::clock::Timestamp;
use crate::name::Name;

/// Deserializes an optional field that may be absent but not `null`:
/// `#[serde(default, deserialize_with = "not_null")]`. A `null` is refused
/// with serde's "invalid type: null" message, which axum prefixes with the
/// field's path.
pub(crate) fn not_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Deserializes a JSON integer as JSON Schema's `integer` means it: any
/// number without a fraction, so `3` and `3.0`, within the range of `T`
/// (not a string): `#[serde(deserialize_with = "integer")]`.
pub(crate) fn integer<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    d.deserialize_any(IntegerVisitor(false, PhantomData))
}

/// [`integer`] for an optional field that may be absent but not `null`:
/// `#[serde(default, deserialize_with = "optional_integer")]`.
pub(crate) fn optional_integer<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    integer(d).map(Some)
}

/// An optional integer query parameter: its text is `3` or `3.0`, as
/// [`integer`]: `#[serde(default, deserialize_with = "query_integer")]`.
pub(crate) fn query_integer<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    d.deserialize_any(IntegerVisitor(true, PhantomData))
        .map(Some)
}

/// An `i64` read by [`integer`], for values inside maps and tuples.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Int(pub i64);

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        integer(d).map(Int)
    }
}

/// Reads an integer; from text too when `.0` is set (query strings).
struct IntegerVisitor<T>(bool, PhantomData<T>);

impl<T: TryFrom<i128>> IntegerVisitor<T> {
    fn fit<E: de::Error>(v: i128) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range for this field")))
    }
}

impl<T: TryFrom<i128>> Visitor<'_> for IntegerVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Self::fit(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Self::fit(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // Every f64 beyond ±2^127 is out of range anyway; `as` saturates.
        if v.fract() != 0.0 || !v.is_finite() {
            return Err(E::invalid_type(de::Unexpected::Float(v), &self));
        }
        Self::fit(v as i128)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        if !self.0 {
            return Err(E::invalid_type(de::Unexpected::Str(v), &self));
        }
        if let Ok(i) = v.parse::<i128>() {
            return Self::fit(i);
        }
        match v.parse::<f64>() {
            Ok(f) if f.is_finite() => self.visit_f64(f),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

/// A name: 1 to 256 characters, no control characters.
pub(crate) fn name(field: &str, value: &str) -> Result<(), ApiError> {
    Name::check(value).map_err(|e| ApiError::field(field, "invalid_name", e))
}

/// A name that also goes into a Redis hash tag: no `{` or `}` either.
pub(crate) fn plain_name(field: &str, value: &str) -> Result<(), ApiError> {
    name(field, value)?;
    if value.contains(['{', '}']) {
        return Err(ApiError::field(
            field,
            "invalid_name",
            format!("invalid name {value:?}: it must not contain `{{` or `}}`"),
        ));
    }
    Ok(())
}

/// A name prefix (a listing's `prefix`): at most 256 characters, no
/// control characters; empty matches every name.
pub(crate) fn prefix(field: &str, value: &str) -> Result<(), ApiError> {
    if value.chars().count() > crate::name::MAX_NAME_CHARS || value.chars().any(char::is_control) {
        return Err(ApiError::field(
            field,
            "invalid_input",
            "a name prefix is at most 256 characters, without control characters",
        ));
    }
    Ok(())
}

/// The most names a listing route returns in one page.
pub(crate) const MAX_LIST: usize = 1000;

/// The query of a listing (`?prefix=&cursor=&limit=`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    prefix: Option<String>,
    cursor: Option<String>,
    #[serde(default, deserialize_with = "query_integer")]
    limit: Option<usize>,
}

impl ListQuery {
    /// The listing's prefix, cursor and page size (default 100, at most
    /// `max`), checked.
    pub(crate) fn checked(&self, max: usize) -> Result<(&str, Option<&str>, usize), ApiError> {
        let limit = self.limit.unwrap_or(100);
        within("limit", "invalid_input", limit, 1, max)?;
        let prefix = self.prefix.as_deref().unwrap_or("");
        self::prefix("prefix", prefix)?;
        if let Some(cursor) = &self.cursor {
            name("cursor", cursor)?;
        }
        Ok((prefix, self.cursor.as_deref(), limit))
    }
}

/// An optional precision: one of `configured` (400 `unknown_precision`
/// naming them otherwise).
pub(crate) fn precision(configured: &[u64], precision: Option<u64>) -> Result<(), ApiError> {
    match precision {
        Some(p) => {
            crate::counters::settings::check_precision_in(configured, p).map_err(ApiError::invalid)
        }
        None => Ok(()),
    }
}

/// An optional time: Unix seconds from 1970 to the end of 9999.
pub(crate) fn time(field: &str, value: Option<f64>) -> Result<(), ApiError> {
    match value {
        Some(t) => Timestamp::from_secs_f64(t)
            .map(|_| ())
            .map_err(|e| ApiError::field(field, "invalid_time", e)),
        None => Ok(()),
    }
}

/// A range's order: its end (the parameter `end_field`) is not in a second
/// before its start's. The one rule in words checked here, so that every
/// route taking a range answers it alike: 422 with code `invalid_time`.
pub(crate) fn range_order(end_field: &str, start: f64, end: f64) -> Result<(), ApiError> {
    if end.floor() < start.floor() {
        return Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_time",
            format!("{end_field}: a range's end ({end}) is before its start ({start})"),
        ));
    }
    Ok(())
}

/// An integer within `min..=max` (a count when `code` is `invalid_count`).
pub(crate) fn within<T>(
    field: &str,
    code: &'static str,
    value: T,
    min: T,
    max: T,
) -> Result<(), ApiError>
where
    T: PartialOrd + Display + Copy,
{
    if value < min || value > max {
        return Err(ApiError::field(
            field,
            code,
            format!("{value} is out of range ({min} to {max})"),
        ));
    }
    Ok(())
}

/// An array of `len` items, `min..=max` of them.
pub(crate) fn items(field: &str, len: usize, min: usize, max: usize) -> Result<(), ApiError> {
    let problem = if len < min {
        format!("at least {min} items, got {len}")
    } else if len > max {
        format!("at most {max} items, got {len}")
    } else {
        return Ok(());
    };
    Err(ApiError::field(field, "invalid_input", problem))
}

/// A batch field of 1 to as many items as the server takes in one batch
/// whose library limit is `library_max` ([`super::openapi::max_batch`],
/// the `maxItems` the document states): converts each into what the
/// library takes and checks it with `each`, given the prefix of its fields
/// in messages (`increments[3].`).
pub(crate) fn batch<B, T: From<B>>(
    settings: &ServerSettings,
    field: &str,
    items: Vec<B>,
    library_max: usize,
    each: impl Fn(&str, &T) -> Result<(), ApiError>,
) -> Result<Vec<T>, ApiError> {
    let max = super::openapi::max_batch(settings, library_max);
    let items: Vec<T> = items.into_iter().map(T::from).collect();
    self::each(field, &items, max, |item_field, item| {
        each(&format!("{item_field}."), item)
    })?;
    Ok(items)
}

/// An array field of 1 to `max` items, each checked by `check` given its
/// own field name in messages (`keys[3]`).
pub(crate) fn each<T>(
    field: &str,
    items: &[T],
    max: usize,
    check: impl Fn(&str, &T) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    self::items(field, items.len(), 1, max)?;
    for (i, item) in items.iter().enumerate() {
        check(&format!("{field}[{i}]"), item)?;
    }
    Ok(())
}

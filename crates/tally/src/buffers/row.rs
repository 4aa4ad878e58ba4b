//! Buffered rows: their identity, their pending changes, and flush batches.
//!
//! Pure values and their encodings, shared by every store and sink:
//! - [`RowKey`]: a table and its key values, encoded as a JSON array
//!   `["table",["v1",...]]` (the row id stores use as a member or key);
//! - [`RowDelta`]: counter deltas and last-write values, merged exactly
//!   (overflow is an error, never a wrap), encoded as a flat JSON array
//!   `["c:col","5","l:col","text",...]` (the layout of the Redis row hash);
//! - [`BatchId`]: 128 bits, the creation time in the top 48 (so a batch's age
//!   is known wherever its id is) and 80 random bits;
//! - [`Claim`]: a batch of rows taken by one flusher.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::error::{Error, Result};

/// A row's identity: its table and key values (in the table's key order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowKey {
    /// The table.
    pub table: String,
    /// Key values, as text.
    pub key: Vec<String>,
}

impl RowKey {
    /// The row id: `["table",["v1",...]]`.
    pub fn id(&self) -> String {
        serde_json::to_string(&(&self.table, &self.key)).expect("strings serialize")
    }

    /// Parses a row id.
    pub fn parse(id: &str) -> Result<Self> {
        let (table, key): (String, Vec<String>) = serde_json::from_str(id)
            .map_err(|e| Error::Corrupt(format!("buffered row id {id:?}: {e}")))?;
        Ok(RowKey { table, key })
    }
}

/// Changes to one row not yet in SQL: deltas to add, values to set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RowDelta {
    /// Counter column → delta.
    pub counters: BTreeMap<String, i64>,
    /// Last-write-wins column → value (text).
    pub last_write: BTreeMap<String, String>,
}

impl RowDelta {
    /// True when it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.last_write.is_empty()
    }

    /// Adds `later` to this delta: counters summed (an overflow is an error
    /// and leaves `self` unchanged), last-write values replaced.
    pub fn merge(&mut self, later: &RowDelta) -> Result<()> {
        let mut sums = Vec::with_capacity(later.counters.len());
        for (col, d) in &later.counters {
            let old = self.counters.get(col).copied().unwrap_or(0);
            let sum = old.checked_add(*d).ok_or_else(|| {
                Error::InvalidCount(format!(
                    "adding {d} to the pending {old} of column {col} would overflow 64 bits; \
                     nothing was written"
                ))
            })?;
            sums.push((col.clone(), sum));
        }
        self.counters.extend(sums);
        for (col, v) in &later.last_write {
            self.last_write.insert(col.clone(), v.clone());
        }
        Ok(())
    }

    /// The flat encoding: `["c:col","5","l:col","text",...]`.
    pub fn to_flat_json(&self) -> String {
        let mut flat: Vec<String> = Vec::new();
        for (c, d) in &self.counters {
            flat.push(format!("c:{c}"));
            flat.push(d.to_string());
        }
        for (c, v) in &self.last_write {
            flat.push(format!("l:{c}"));
            flat.push(v.clone());
        }
        serde_json::to_string(&flat).expect("strings serialize")
    }

    /// Parses the flat encoding (an empty JSON object, as Redis's cjson
    /// writes an empty table, is an empty delta).
    pub fn from_flat_json(text: &str) -> Result<Self> {
        let corrupt = |why: &str| Error::Corrupt(format!("buffered row data {text:?}: {why}"));
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| corrupt(&e.to_string()))?;
        let items = match value {
            serde_json::Value::Array(items) => items,
            serde_json::Value::Object(map) if map.is_empty() => Vec::new(),
            _ => return Err(corrupt("not an array")),
        };
        let strings = items
            .into_iter()
            .map(|v| match v {
                serde_json::Value::String(s) => Ok(s),
                serde_json::Value::Number(n) => Ok(n.to_string()),
                _ => Err(corrupt("an item is not a string")),
            })
            .collect::<Result<Vec<String>>>()?;
        Self::from_flat(&strings).map_err(|e| corrupt(&e.to_string()))
    }

    /// Parses alternating field/value strings (`c:col`, delta, `l:col`, value).
    pub fn from_flat(flat: &[String]) -> Result<Self> {
        if !flat.len().is_multiple_of(2) {
            return Err(Error::Corrupt("odd number of items".into()));
        }
        let mut delta = RowDelta::default();
        for pair in flat.chunks(2) {
            let (field, value) = (&pair[0], &pair[1]);
            if let Some(col) = field.strip_prefix("c:") {
                let d = value
                    .parse::<i64>()
                    .map_err(|_| Error::Corrupt(format!("delta {value:?} of {col}")))?;
                delta.counters.insert(col.to_owned(), d);
            } else if let Some(col) = field.strip_prefix("l:") {
                delta.last_write.insert(col.to_owned(), value.clone());
            } else {
                return Err(Error::Corrupt(format!("unknown field {field:?}")));
            }
        }
        Ok(delta)
    }
}

/// A row and its pending changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowUpdate {
    /// The row.
    pub row: RowKey,
    /// Its changes.
    pub delta: RowDelta,
}

/// The identity of a flush batch: creation time (ms) in the top 48 bits, 80
/// random bits below. Unique across processes and restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub u128);

impl BatchId {
    /// A fresh id created at `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        let random = crate::random::u128() & ((1u128 << 80) - 1);
        BatchId((u128::from(now_ms & ((1 << 48) - 1)) << 80) | random)
    }

    /// When the batch was created, Unix ms.
    pub fn created_ms(self) -> u64 {
        (self.0 >> 80) as u64
    }

    /// Parses the 32-hex-digit form.
    pub fn parse(text: &str) -> Result<Self> {
        if text.len() != 32 {
            return Err(Error::Corrupt(format!("batch id {text:?}")));
        }
        u128::from_str_radix(text, 16)
            .map(BatchId)
            .map_err(|_| Error::Corrupt(format!("batch id {text:?}")))
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// A batch of rows claimed by one flusher, with everything needed to write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The batch id (recorded in SQL with the batch's writes).
    pub batch: BatchId,
    /// Store-specific partition the claim lives in (a Redis shard; 0 on SQLite).
    pub shard: u32,
    /// The rows and their changes, each row at most once.
    pub rows: Vec<RowUpdate>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn row_ids_round_trip_any_text() {
        let k = RowKey {
            table: "groups".into(),
            key: vec!["42".into(), "a\"b,\u{1F600}".into()],
        };
        assert_eq!(k.id(), r#"["groups",["42","a\"b,😀"]]"#);
        assert_eq!(RowKey::parse(&k.id()).unwrap(), k);
        assert!(RowKey::parse("nope").is_err());
    }

    #[test]
    fn merging_sums_exactly_and_refuses_overflow() {
        let mut a = RowDelta::default();
        a.counters.insert("n".into(), i64::MAX - 1);
        a.last_write.insert("seen".into(), "1".into());
        let mut b = RowDelta::default();
        b.counters.insert("n".into(), 1);
        b.counters.insert("m".into(), -3);
        b.last_write.insert("seen".into(), "2".into());
        a.merge(&b).unwrap();
        assert_eq!(a.counters["n"], i64::MAX);
        assert_eq!(a.counters["m"], -3);
        assert_eq!(a.last_write["seen"], "2");
        let before = a.clone();
        assert!(a.merge(&b).unwrap_err().to_string().contains("overflow"));
        assert_eq!(a, before, "a failed merge changes nothing");
    }

    #[test]
    fn flat_encoding_round_trips_and_reads_cjson() {
        let mut d = RowDelta::default();
        d.counters.insert("times_seen".into(), 5);
        d.last_write.insert("last_seen".into(), "2024-01-01".into());
        let text = d.to_flat_json();
        assert_eq!(text, r#"["c:times_seen","5","l:last_seen","2024-01-01"]"#);
        assert_eq!(RowDelta::from_flat_json(&text).unwrap(), d);
        assert!(RowDelta::from_flat_json("{}").unwrap().is_empty());
        assert!(RowDelta::from_flat_json(r#"["x:y","1"]"#).is_err());
        assert!(RowDelta::from_flat_json(r#"["c:y","z"]"#).is_err());
    }

    #[test]
    fn batch_ids_carry_their_creation_time() {
        let id = BatchId::new(1_700_000_000_123);
        assert_eq!(id.created_ms(), 1_700_000_000_123);
        assert_eq!(BatchId::parse(&id.to_string()).unwrap(), id);
        assert_ne!(BatchId::new(5), BatchId::new(5));
        assert!(BatchId::parse("xyz").is_err());
    }

    proptest! {
        #[test]
        fn merge_is_sum_when_in_range(xs in proptest::collection::vec(-1_000_000i64..1_000_000, 1..20)) {
            let mut acc = RowDelta::default();
            for x in &xs {
                let mut d = RowDelta::default();
                d.counters.insert("c".into(), *x);
                acc.merge(&d).unwrap();
            }
            prop_assert_eq!(acc.counters["c"], xs.iter().sum::<i64>());
            prop_assert_eq!(RowDelta::from_flat_json(&acc.to_flat_json()).unwrap(), acc);
        }
    }
}

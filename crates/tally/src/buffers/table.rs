//! Table mappings: which SQL table a buffered row goes to, and its columns.
//!
//! A [`TableSpec`] names the table, its key columns (the row's identity, with
//! a unique index over them in the database), its counter columns (added to)
//! and its last-write-wins columns (overwritten). [`Tables`] is the validated
//! set, checked once at start: every name a valid [`Ident`], at least one key
//! and one value column, no column in two roles.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ident::Ident;
use crate::error::{Error, Result};

/// The most tables one buffer maps.
pub const MAX_TABLES: usize = 256;
/// The most columns of one table.
pub const MAX_COLUMNS: usize = 64;

/// One table's mapping, as configured.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    /// The SQL table.
    pub name: String,
    /// Key columns (a unique index must cover exactly these).
    pub key: Vec<String>,
    /// Columns incremented by deltas.
    #[serde(default)]
    pub counters: Vec<String>,
    /// Columns set to the last value written.
    #[serde(default)]
    pub last_write: Vec<String>,
}

/// One table's validated mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSpec {
    /// The SQL table.
    pub name: Ident,
    /// Key columns, in the order row keys are given.
    pub key: Vec<Ident>,
    /// Counter columns.
    pub counters: Vec<Ident>,
    /// Last-write-wins columns.
    pub last_write: Vec<Ident>,
}

impl TableSpec {
    /// Validates a mapping.
    pub fn new(config: &TableConfig) -> Result<Self> {
        let name = Ident::new(&config.name, "table name")?;
        let cols = |list: &[String], role: &str| -> Result<Vec<Ident>> {
            list.iter()
                .map(|c| Ident::new(c, &format!("{role} column of table {name}")))
                .collect()
        };
        let spec = TableSpec {
            key: cols(&config.key, "key")?,
            counters: cols(&config.counters, "counter")?,
            last_write: cols(&config.last_write, "last-write")?,
            name,
        };
        if spec.key.is_empty() {
            return Err(Error::Config(format!(
                "table {} needs at least one key column",
                spec.name
            )));
        }
        if spec.counters.is_empty() && spec.last_write.is_empty() {
            return Err(Error::Config(format!(
                "table {} needs at least one counter or last-write column",
                spec.name
            )));
        }
        let all: Vec<&Ident> = spec.columns().collect();
        if all.len() > MAX_COLUMNS {
            return Err(Error::Config(format!(
                "table {} maps {} columns, at most {MAX_COLUMNS}",
                spec.name,
                all.len()
            )));
        }
        for (i, c) in all.iter().enumerate() {
            if all[..i].contains(c) {
                return Err(Error::Config(format!(
                    "column {c} of table {} is listed twice",
                    spec.name
                )));
            }
        }
        Ok(spec)
    }

    /// Every mapped column: keys, counters, then last-write columns.
    pub fn columns(&self) -> impl Iterator<Item = &Ident> {
        self.key
            .iter()
            .chain(&self.counters)
            .chain(&self.last_write)
    }
}

/// The validated set of table mappings, by table name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tables {
    by_name: BTreeMap<String, TableSpec>,
}

impl Tables {
    /// Validates mappings; table names must be unique.
    pub fn new(configs: &[TableConfig]) -> Result<Self> {
        if configs.len() > MAX_TABLES {
            return Err(Error::Config(format!(
                "at most {MAX_TABLES} buffered tables, got {}",
                configs.len()
            )));
        }
        let mut by_name = BTreeMap::new();
        for config in configs {
            let spec = TableSpec::new(config)?;
            let name = spec.name.as_str().to_owned();
            if by_name.insert(name.clone(), spec).is_some() {
                return Err(Error::Config(format!("table {name} is mapped twice")));
            }
        }
        Ok(Tables { by_name })
    }

    /// The mapping of `table`, or an error naming the known tables.
    pub fn get(&self, table: &str) -> Result<&TableSpec> {
        self.by_name.get(table).ok_or_else(|| {
            Error::InvalidInput(format!(
                "table {table:?} is not buffered (configured: {})",
                self.by_name.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    /// Every mapping, in table name order.
    pub fn iter(&self) -> impl Iterator<Item = &TableSpec> {
        self.by_name.values()
    }

    /// True when no table is mapped.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
impl TableConfig {
    /// A mapping of table `name` (for tests).
    pub(crate) fn of(name: &str, key: &[&str], counters: &[&str], last_write: &[&str]) -> Self {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        TableConfig {
            name: name.into(),
            key: v(key),
            counters: v(counters),
            last_write: v(last_write),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mappings_are_checked() {
        let ok = Tables::new(&[TableConfig::of(
            "groups",
            &["id"],
            &["times_seen"],
            &["last_seen"],
        )])
        .unwrap();
        assert_eq!(ok.get("groups").unwrap().columns().count(), 3);
        assert!(
            ok.get("nope")
                .unwrap_err()
                .to_string()
                .contains("configured: groups")
        );
        let err = |c: TableConfig| Tables::new(&[c]).unwrap_err().to_string();
        assert!(err(TableConfig::of("g", &[], &["n"], &[])).contains("at least one key"));
        assert!(err(TableConfig::of("g", &["id"], &[], &[])).contains("counter or last-write"));
        assert!(err(TableConfig::of("g", &["id"], &["id"], &[])).contains("listed twice"));
        assert!(err(TableConfig::of("g;drop", &["id"], &["n"], &[])).contains("table name"));
        assert!(
            err(TableConfig::of("g", &["id"], &["n\""], &[])).contains("counter column of table g")
        );
        let twice = Tables::new(&[
            TableConfig::of("g", &["id"], &["n"], &[]),
            TableConfig::of("g", &["id"], &["n"], &[]),
        ]);
        assert!(twice.unwrap_err().to_string().contains("mapped twice"));
    }
}

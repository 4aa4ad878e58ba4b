//! The SQL of one space, made once from the template (see [`super`]), and
//! how a kind's value is kept in a cell.

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::engine::{Kind, Space, Value};
use crate::error::{Error, Result};

/// The lanes of every writer, shared by all spaces.
const WRITERS: &str = "
CREATE TABLE IF NOT EXISTS tally_writer (
    lane TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// The SQL of one space, made once from the template.
#[derive(Debug)]
pub(super) struct Tables {
    pub(super) schema: String,
    pub(super) series_id: String,
    pub(super) insert_series: String,
    pub(super) read_cell: String,
    pub(super) upsert_cell: String,
    pub(super) read_all: String,
    pub(super) read_range: String,
    /// Names in a range, one query per kind of bounds, so that SQLite
    /// seeks the name index at both ends: `[lower` or `(lower`, then
    /// `upper)` or no upper bound (`list[after as usize][has upper]`).
    pub(super) list: [[String; 2]; 2],
    pub(super) delete_cells: String,
    pub(super) delete_series: String,
    pub(super) series_after: String,
    pub(super) trim: String,
    pub(super) drop_empty: String,
    /// Gauges only: each gauge's current value.
    pub(super) read_current: String,
    pub(super) write_current: String,
    pub(super) delete_current: String,
}

impl Tables {
    pub(super) fn of(space: &Space) -> Self {
        // Counters keep their historic names; other spaces follow the template.
        let (series, cell, fk, res, value, value_type) = if space.is_counters() {
            (
                "tally_counter".to_owned(),
                "tally_sample".to_owned(),
                "counter_id",
                "precision",
                "count",
                "INTEGER",
            )
        } else {
            let value_type = if space.kind == Kind::Sum {
                "INTEGER"
            } else {
                "BLOB"
            };
            (
                format!("tally_{}_series", space.id),
                format!("tally_{}_cell", space.id),
                "series_id",
                "resolution",
                "value",
                value_type,
            )
        };
        let current = format!("tally_{}_current", space.id);
        let current_schema = if space.kind == Kind::Gauge {
            format!(
                "CREATE TABLE IF NOT EXISTS {current} (
                    series_id INTEGER PRIMARY KEY,
                    value REAL NOT NULL
                );"
            )
        } else {
            String::new()
        };
        Tables {
            schema: format!(
                "CREATE TABLE IF NOT EXISTS {series} (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE
                );
                CREATE TABLE IF NOT EXISTS {cell} (
                    {fk} INTEGER NOT NULL,
                    {res} INTEGER NOT NULL,
                    slice INTEGER NOT NULL,
                    {value} {value_type} NOT NULL,
                    PRIMARY KEY ({fk}, {res}, slice)
                ) WITHOUT ROWID;
                {current_schema}
                {WRITERS}"
            ),
            series_id: format!("SELECT id FROM {series} WHERE name = ?1"),
            insert_series: format!("INSERT INTO {series} (name) VALUES (?1)"),
            read_cell: format!(
                "SELECT {value} FROM {cell} WHERE {fk} = ?1 AND {res} = ?2 AND slice = ?3"
            ),
            upsert_cell: format!(
                "INSERT INTO {cell} ({fk}, {res}, slice, {value}) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT ({fk}, {res}, slice) DO UPDATE SET {value} = excluded.{value}"
            ),
            read_all: format!(
                "SELECT slice, {value} FROM {cell} WHERE {fk} = ?1 AND {res} = ?2 ORDER BY slice"
            ),
            read_range: format!(
                "SELECT slice, {value} FROM {cell}
                 WHERE {fk} = ?1 AND {res} = ?2 AND slice BETWEEN ?3 AND ?4 ORDER BY slice"
            ),
            list: [">=", ">"].map(|op| {
                [
                    format!("SELECT name FROM {series} WHERE name {op} ?1 ORDER BY name LIMIT ?2"),
                    format!(
                        "SELECT name FROM {series} WHERE name {op} ?1 AND name < ?3
                         ORDER BY name LIMIT ?2"
                    ),
                ]
            }),
            delete_cells: format!("DELETE FROM {cell} WHERE {fk} = ?1"),
            delete_series: format!("DELETE FROM {series} WHERE id = ?1"),
            series_after: format!("SELECT id FROM {series} WHERE id > ?1 ORDER BY id LIMIT ?2"),
            trim: format!("DELETE FROM {cell} WHERE {fk} = ?1 AND {res} = ?2 AND slice <= ?3"),
            drop_empty: format!(
                "DELETE FROM {series} WHERE id = ?1
                 AND NOT EXISTS (SELECT 1 FROM {cell} WHERE {fk} = ?1)"
            ),
            read_current: format!("SELECT value FROM {current} WHERE series_id = ?1"),
            write_current: format!(
                "INSERT INTO {current} (series_id, value) VALUES (?1, ?2)
                 ON CONFLICT (series_id) DO UPDATE SET value = excluded.value"
            ),
            delete_current: format!("DELETE FROM {current} WHERE series_id = ?1"),
        }
    }
}

/// A value as SQLite keeps it: sums as INTEGER, other kinds as a BLOB.
pub(super) struct Stored<'a>(pub(super) &'a Value);

impl ToSql for Stored<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0.as_sum() {
            Some(s) => ToSqlOutput::from(s),
            None => {
                let mut bytes = Vec::new();
                self.0.encode(&mut bytes);
                ToSqlOutput::from(bytes)
            }
        })
    }
}

/// Reads a stored value of `kind` back.
pub(super) fn stored(kind: Kind, v: ValueRef<'_>) -> Result<Value> {
    match (kind, v) {
        (Kind::Sum, ValueRef::Integer(i)) => Ok(Value::Sum(i)),
        (kind, ValueRef::Blob(b)) if kind != Kind::Sum => kind.decode(b),
        (kind, other) => Err(Error::Corrupt(format!(
            "a {kind} cell holds {:?}",
            other.data_type()
        ))),
    }
}

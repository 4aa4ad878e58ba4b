//! The SQL of one space, made once from the template (see [`super`]), and
//! the SQLite store's table of kinds: how each kind's value is kept in a
//! cell and what else its series keep ([`KINDS`]).

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::engine::store::check_stored;
use crate::engine::{Kind, Space, Value};
use crate::error::{Error, Result};

/// The lanes of every writer, shared by all spaces (and daily statistics).
pub(in crate::backend::sqlite) const WRITERS: &str = "
CREATE TABLE IF NOT EXISTS tally_writer (
    lane TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL
) WITHOUT ROWID;
";

/// How one kind is kept in SQLite.
#[derive(Debug)]
pub(super) struct KindTable {
    /// The kind.
    pub kind: Kind,
    /// True when a cell holds an INTEGER (sums, added as `HINCRBY` does);
    /// else a BLOB of the kind's encoding, merged in Rust by its rule.
    pub integer: bool,
    /// True when each series keeps its current value (gauges:
    /// `tally_<space>_current`, which a write's adjustments start from and
    /// a delete removes).
    pub current: bool,
}

/// Every kind this store keeps. Adding a kind to this store is one entry.
pub(super) const KINDS: [KindTable; 4] = [
    KindTable {
        kind: Kind::Sum,
        integer: true,
        current: false,
    },
    KindTable {
        kind: Kind::Stats,
        integer: false,
        current: false,
    },
    KindTable {
        kind: Kind::Gauge,
        integer: false,
        current: true,
    },
    KindTable {
        kind: Kind::Distinct,
        integer: false,
        current: false,
    },
];

/// The entry of `kind`, or the error of a kind this store does not keep.
pub(super) fn kind_table(kind: Kind) -> Result<&'static KindTable> {
    check_stored(kind)?;
    KINDS.iter().find(|k| k.kind == kind).ok_or_else(|| {
        Error::Backend(format!(
            "internal error: the SQLite store has no entry for {kind} values"
        ))
    })
}

/// The SQL of one space, made once from the template.
#[derive(Debug)]
pub(super) struct Tables {
    /// How the space's kind is kept.
    pub(super) kind: &'static KindTable,
    pub(super) schema: String,
    pub(super) series_id: String,
    pub(super) insert_series: String,
    pub(super) read_cell: String,
    pub(super) upsert_cell: String,
    pub(super) read_all: String,
    pub(super) read_range: String,
    /// Names in a range, one query per kind of bounds, so that SQLite
    /// seeks the name index at both ends: `[lower` or `(lower`, then
    /// `upper)` or no upper bound (`list[after as usize][has upper]`). No
    /// `LIMIT ?`: SQLite re-prepares a statement each time a new value is
    /// bound to a limit, so a page is cut by stepping no further.
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
    pub(super) fn of(space: &Space, kind: &'static KindTable) -> Self {
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
            let value_type = if kind.integer { "INTEGER" } else { "BLOB" };
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
        let current_schema = if kind.current {
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
            kind,
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
                    format!("SELECT name FROM {series} WHERE name {op} ?1 ORDER BY name"),
                    format!(
                        "SELECT name FROM {series} WHERE name {op} ?1 AND name < ?2 ORDER BY name"
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
pub(super) fn stored(kind: &KindTable, v: ValueRef<'_>) -> Result<Value> {
    match (kind.integer, v) {
        (true, ValueRef::Integer(i)) => Ok(Value::Sum(i)),
        (false, ValueRef::Blob(b)) => kind.kind.decode(b),
        (_, other) => Err(Error::Corrupt(format!(
            "a {} cell holds {:?}",
            kind.kind,
            other.data_type()
        ))),
    }
}

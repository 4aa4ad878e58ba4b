//! Per-entity daily statistics (the "million ads on Redis Cluster" article,
//! docs/reference.md): views per entity per day, the last N days, one day,
//! today, and the all-time total.
//!
//! [`DailyStats`] is the service: it validates entity ids and counts, turns
//! instants into calendar days (UTC, or a fixed offset), and works out the
//! retention window from its clock. An increment is one atomic step per
//! entity that adds to the day and to the all-time total, and drops days
//! that left the window while keeping their views in the total (the store
//! does it in the same step, for that entity only: no cleaner scans
//! anything). Reads are one round trip. Days older than the window read as
//! 0 even before they are physically dropped.
//!
//! On Redis the data is the article's hash and nothing else (unless the
//! running total, [`DailyTotal::Running`], is chosen), so its own code
//! may write and read the same entities: see
//! [`crate::backend::redis::RedisDailyStore`] for what holds then. The total
//! is O(1) on SQLite; on Redis it is the sum of the entity's hash (at most
//! retention + 1 fields), as the article computes it.
//!
//! [`DailyWriter`] is the aggregating writer: views of the same (entity,
//! day) merged in process and written in chunks, exactly once by writer
//! lane and sequence number as the engine's writer does
//! ([`DailyStore::incr_lane`]).

mod day;
pub mod store;
mod writer;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use day::{Day, MAX_OFFSET_MINUTES, civil_from_days};
pub use store::{DailyHeld, DailyStore, DailyWrite, DailyWritten};
pub use writer::DailyWriter;

use crate::clock::{SharedClock, Timestamp, constructors};
use crate::engine::{Applied, plan};
use crate::error::{Error, Result};
use crate::idempotency::Mark;
use crate::name::Name;

/// The default retention: 90 days.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
/// The longest accepted retention: about ten years.
pub const MAX_RETENTION_DAYS: u32 = 3660;
/// The default entity key prefix on Redis (the article's `advert`).
pub const DEFAULT_ENTITY_PREFIX: &str = "advert";
/// The most views in one [`DailyStats::incr_many`] call.
pub const MAX_BATCH: usize = 10_000;

/// What daily statistics keep and how days are cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DailySettings {
    /// Days kept, today included.
    pub retention_days: u32,
    /// The calendar's offset east of UTC, in minutes (0: UTC).
    pub utc_offset_minutes: i32,
}

impl Default for DailySettings {
    fn default() -> Self {
        DailySettings {
            retention_days: DEFAULT_RETENTION_DAYS,
            utc_offset_minutes: 0,
        }
    }
}

impl DailySettings {
    /// Checks the settings.
    pub fn validate(self) -> Result<Self> {
        if self.retention_days == 0 || self.retention_days > MAX_RETENTION_DAYS {
            return Err(Error::Config(format!(
                "daily retention must be 1 to {MAX_RETENTION_DAYS} days, got {}",
                self.retention_days
            )));
        }
        if self.utc_offset_minutes.abs() > MAX_OFFSET_MINUTES {
            return Err(Error::Config(format!(
                "the UTC offset must be within ±{MAX_OFFSET_MINUTES} minutes, got {}",
                self.utc_offset_minutes
            )));
        }
        Ok(self)
    }
}

/// Where a Redis store keeps an entity's all-time total (SQLite keeps it
/// in a column either way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DailyTotal {
    /// The sum of the views hash, as the article computes it: the hash is
    /// the whole state, so the article's own code may write the same
    /// entities. A write reads the hash.
    #[default]
    Hash,
    /// A running total in `{<prefix>:<id>}:stats`, raised by each write:
    /// a write reads nothing of the views hash, so over entities that hold
    /// a month of days it costs Redis a quarter to a third as much (the
    /// same over new ones), and only Tally may write these entities (the
    /// article's own increments would not reach the total). Data of either kind is read right by
    /// both, and each one's next write of an entity converts it.
    Running,
}

impl DailyTotal {
    /// Parses `hash` or `running`.
    pub fn parse(text: &str) -> Result<Self> {
        match text {
            "hash" => Ok(DailyTotal::Hash),
            "running" => Ok(DailyTotal::Running),
            other => Err(Error::Config(format!(
                "unknown daily total {other:?}: expected `hash` or `running`"
            ))),
        }
    }

    /// Its name, as [`DailyTotal::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            DailyTotal::Hash => "hash",
            DailyTotal::Running => "running",
        }
    }
}

/// One view (or several) of an entity, as a caller states it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct View {
    /// The entity id.
    pub entity: String,
    /// How many views (at least 1); defaults to 1.
    #[serde(default = "crate::engine::plan::one")]
    pub count: i64,
    /// When, Unix seconds; defaults to now.
    #[serde(default)]
    pub at: Option<f64>,
}

/// A day and its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCount {
    /// The day (`YYYY-MM-DD` in JSON).
    pub day: Day,
    /// Views on that day.
    pub count: i64,
}

/// What an increment left: the day's count and the all-time total.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// The day the views were counted on.
    pub day: Day,
    /// That day's count afterwards (0 if the day is outside the window).
    pub day_count: i64,
    /// The entity's all-time total afterwards.
    pub total: i64,
}

/// Per-entity daily statistics. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let daily = tally.daily();
///
/// daily.incr("ad-7").await?; // one view today
/// let counted = daily.incr_by("ad-7", 2, None).await?;
/// assert_eq!(counted.total, 3); // the all-time total, in the same round trip
///
/// let week = daily.last("ad-7", 7).await?; // one count per day, oldest first
/// assert_eq!(week.len(), 7);
/// assert_eq!(week.iter().map(|d| d.count).sum::<i64>(), 3);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct DailyStats {
    store: Arc<dyn DailyStore>,
    settings: DailySettings,
    clock: SharedClock,
}

/// Validates an entity id: a [`Name`] without `{` or `}` (they would change
/// the Redis hash tag).
pub fn entity_id(entity: &str) -> Result<Name> {
    check_entity(entity)?;
    Ok(Name::from_checked(entity.to_owned()))
}

/// Checks an entity id as [`entity_id`] does, without making a [`Name`]
/// of it (the writer's path: only an entity new to its table needs one).
/// A refusal is [`Name::untagged`]'s own error.
fn check_entity(entity: &str) -> Result<()> {
    Name::check(entity)?;
    // `{` and `}` are ASCII, so no other character's UTF-8 holds their bytes.
    if entity.bytes().any(|b| b == b'{' || b == b'}') {
        return Name::untagged(ENTITY, entity).map(drop);
    }
    Ok(())
}

/// What an entity id is called in errors.
const ENTITY: &str = "an entity id";

impl DailyStats {
    constructors! {
        "Daily statistics", |store: dyn DailyStore, settings: DailySettings, clock| {
            Ok(DailyStats {
                store,
                settings,
                clock,
            })
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &DailySettings {
        &self.settings
    }

    /// Today, by the clock and the configured offset.
    pub fn today(&self) -> Day {
        Day::of(self.clock.now(), self.settings.utc_offset_minutes)
    }

    /// The store (for `tally migrate`, which copies what it holds).
    pub(crate) fn store(&self) -> &Arc<dyn DailyStore> {
        &self.store
    }

    /// The oldest day kept now.
    pub(crate) fn floor_now(&self) -> Day {
        self.floor(self.today())
    }

    /// The oldest day kept at `now`.
    fn floor_at(&self, now: Timestamp) -> Day {
        self.floor(Day::of(now, self.settings.utc_offset_minutes))
    }

    /// Checks a view (its entity id, its count, its time; `at` defaults to
    /// `now`) and gives its entity and day.
    fn check(&self, v: &View, now: Timestamp) -> Result<(Name, Day)> {
        let day = self.check_view(&v.entity, v.count, v.at, || now)?;
        Ok((Name::from_checked(v.entity.clone()), day))
    }

    /// Checks a view's parts (its entity id, its count, its time, in that
    /// order) and gives its day; reads `now` only when `at` is not given,
    /// and makes no [`Name`] (the writer's path).
    fn check_view(
        &self,
        entity: &str,
        count: i64,
        at: Option<f64>,
        now: impl FnOnce() -> Timestamp,
    ) -> Result<Day> {
        check_entity(entity)?;
        if count < 1 {
            return Err(Error::InvalidCount(format!(
                "views are counted from 1 up, got {count} for entity {entity:?}"
            )));
        }
        let at = match at {
            Some(at) => Timestamp::from_secs_f64(at)?,
            None => now(),
        };
        Ok(Day::of(at, self.settings.utc_offset_minutes))
    }

    /// The oldest day kept when today is `today`.
    fn floor(&self, today: Day) -> Day {
        today.plus(1 - self.settings.retention_days as i32)
    }

    /// Counts one view of `entity` now.
    pub async fn incr(&self, entity: &str) -> Result<Counted> {
        self.incr_by(entity, 1, None).await
    }

    /// Counts `count` views of `entity` at `at` (default now).
    pub async fn incr_by(&self, entity: &str, count: i64, at: Option<f64>) -> Result<Counted> {
        let mut out = self
            .incr_many(&[View {
                entity: entity.to_owned(),
                count,
                at,
            }])
            .await?;
        Ok(out.pop().expect("one result per view"))
    }

    /// Counts a batch of views (each entity's part atomic), in one round
    /// trip. Every view is validated before anything is written.
    pub async fn incr_many(&self, views: &[View]) -> Result<Vec<Counted>> {
        Ok(self.write(views, None, self.clock.now()).await?.1)
    }

    /// [`DailyStats::incr_many`] with an idempotency key: the batch carries
    /// the key's mark, so the same key sent again adds nothing
    /// ([`Applied::Duplicate`]) and answers each view's day count and total
    /// as they are now. On Redis each entity's part carries the mark, so
    /// each part is counted once (a batch cut short by a crash is completed
    /// by its repeat); the answer is [`Applied::Written`] when any part was
    /// counted this time.
    pub async fn incr_many_once(
        &self,
        key: &str,
        views: &[View],
    ) -> Result<(Applied, Vec<Counted>)> {
        let now = self.clock.now();
        let mark = Mark::of(key, now)?;
        self.write(views, Some(&mark), now).await
    }

    async fn write(
        &self,
        views: &[View],
        mark: Option<&Mark>,
        now: Timestamp,
    ) -> Result<(Applied, Vec<Counted>)> {
        plan::check_batch_len(views.len(), MAX_BATCH, "views")?;
        let floor = self.floor_at(now);
        let writes = views
            .iter()
            .map(|v| {
                let (entity, day) = self.check(v, now)?;
                Ok(DailyWrite {
                    entity,
                    day,
                    count: v.count,
                    floor,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let written = self.store.incr(&writes, mark).await?;
        let applied = if written.iter().any(|r| r.applied == Applied::Written) {
            Applied::Written
        } else {
            Applied::Duplicate
        };
        let counted = writes
            .iter()
            .zip(written)
            .map(|(w, r)| Counted {
                day: w.day,
                day_count: r.day_count,
                total: r.total,
            })
            .collect();
        Ok((applied, counted))
    }

    /// The last `n` days ending today, oldest first, missing days as 0.
    pub async fn last(&self, entity: &str, n: u32) -> Result<Vec<DayCount>> {
        if n == 0 || n > MAX_RETENTION_DAYS {
            return Err(Error::InvalidInput(format!(
                "ask for 1 to {MAX_RETENTION_DAYS} days, got {n}"
            )));
        }
        let today = self.today();
        let days: Vec<Day> = (0..n as i32).rev().map(|i| today.plus(-i)).collect();
        self.days(entity, &days).await
    }

    /// The counts of the given days, in the order given (0 outside the
    /// retention window).
    pub async fn days(&self, entity: &str, days: &[Day]) -> Result<Vec<DayCount>> {
        let entity = entity_id(entity)?;
        if days.len() > MAX_RETENTION_DAYS as usize {
            return Err(Error::InvalidInput(format!(
                "ask for at most {MAX_RETENTION_DAYS} days, got {}",
                days.len()
            )));
        }
        let floor = self.floor(self.today());
        let kept: Vec<Day> = days.iter().copied().filter(|d| *d >= floor).collect();
        let counts = if kept.is_empty() {
            Vec::new()
        } else {
            self.store.days(&entity, &kept).await?
        };
        let mut counts = counts.into_iter();
        Ok(days
            .iter()
            .map(|&day| DayCount {
                day,
                count: if day >= floor {
                    counts.next().unwrap_or(0)
                } else {
                    0
                },
            })
            .collect())
    }

    /// One day's count (0 outside the retention window).
    pub async fn day(&self, entity: &str, day: Day) -> Result<i64> {
        Ok(self.days(entity, &[day]).await?[0].count)
    }

    /// Today's count.
    pub async fn today_count(&self, entity: &str) -> Result<DayCount> {
        let today = self.today();
        Ok(self.days(entity, &[today]).await?[0])
    }

    /// The all-time total (on Redis the sum of the entity's hash, at most
    /// retention + 1 fields; O(1) on SQLite).
    pub async fn total(&self, entity: &str) -> Result<i64> {
        let entity = entity_id(entity)?;
        self.store.total(&entity).await
    }

    /// Checks that the backend answers.
    pub async fn ping(&self) -> Result<()> {
        self.store.ping().await
    }
}

//! Where statsd samples go: a [`Target`] is one kind's aggregating writer
//! as the listener writes to it, and [`StatsdRules`] say which readings
//! that kind takes and how one becomes its operation. The registry of
//! spaces ([`crate::open::SPACES`]) lists each space's target; the
//! listener (`server/statsd.rs`) indexes them by [`ReadingKind`] once and
//! knows no kind by name.

use std::fmt;
use std::sync::Arc;

use super::{Reading, ReadingKind, Sample};
use crate::clock::{SharedClock, Timestamp};
use crate::counters::{CounterRules, Increment};
use crate::engine::plan::{self, Item};
use crate::engine::series::{Rules, SeriesWriter};
use crate::engine::store::Space;
use crate::engine::{Value, Writer};
use crate::error::{Error, Result};
use crate::gauges::{GaugeOp, GaugeRules};
use crate::sets::{SetAdd, SetRules};
use crate::stats::{Observation, StatRules};

/// What a kind with a statsd type takes from the listener.
pub trait StatsdRules: Rules + Sized {
    /// The readings its writer takes.
    const READINGS: &'static [ReadingKind];

    /// The operation of a sample of `name` (its time is given apart);
    /// `None` for a reading it does not take.
    fn op(name: &str, reading: Reading<'_>) -> Option<Self::Op>;

    /// A reading's delta taken straight into the engine's writer, no
    /// operation built or validated: the counters' fast path for a count.
    /// `None` (every other kind) goes through [`StatsdRules::op`].
    fn direct(_: Reading<'_>) -> Option<Value> {
        None
    }
}

/// Takes a sample of `name` into `writer` without ever waiting, as
/// [`SeriesWriter::try_take`] takes its operation, at `now` when it has
/// no time.
fn take<R: StatsdRules>(
    writer: &SeriesWriter<R>,
    name: &str,
    sample: Sample<'_>,
    now: Timestamp,
) -> Result<()> {
    let delta = match R::direct(sample.reading) {
        Some(delta) => delta,
        None => {
            writer
                .service()
                .validate(&op::<R>(name, sample.reading)?, now)?
                .2
        }
    };
    writer.engine().try_add_at(name, delta, at(sample), now)
}

/// A sample's time as the engine takes it: Unix seconds, `None` for now.
fn at(sample: Sample<'_>) -> Option<f64> {
    sample.at.map(|t| t as f64)
}

/// The operation of a sample, or why the kind does not take it.
fn op<R: StatsdRules>(name: &str, reading: Reading<'_>) -> Result<R::Op> {
    R::op(name, reading).ok_or_else(|| {
        Error::InvalidInput(format!(
            "{name:?}: a {:?} reading does not go to the {}",
            reading.kind(),
            R::WRITER
        ))
    })
}

impl StatsdRules for CounterRules {
    const READINGS: &'static [ReadingKind] = &[ReadingKind::Count];

    fn op(name: &str, reading: Reading<'_>) -> Option<Increment> {
        match reading {
            Reading::Count(count) => Some(Increment::new(name, count)),
            _ => None,
        }
    }

    /// The count straight into the engine's writer.
    fn direct(reading: Reading<'_>) -> Option<Value> {
        match reading {
            Reading::Count(count) => Some(Value::Sum(count)),
            _ => None,
        }
    }
}

impl StatsdRules for StatRules {
    const READINGS: &'static [ReadingKind] = &[ReadingKind::Observation];

    fn op(name: &str, reading: Reading<'_>) -> Option<Observation> {
        let Reading::Observation { value, weight } = reading else {
            return None;
        };
        Some(Observation::new(name, value).weight(weight))
    }
}

impl StatsdRules for GaugeRules {
    const READINGS: &'static [ReadingKind] = &[ReadingKind::Gauge];

    /// `+5` / `-5` adjust, `5` sets.
    fn op(name: &str, reading: Reading<'_>) -> Option<GaugeOp> {
        match reading {
            Reading::Gauge {
                value,
                relative: true,
            } => Some(GaugeOp::adjust(name, value)),
            Reading::Gauge { value, .. } => Some(GaugeOp::set(name, value)),
            _ => None,
        }
    }
}

impl StatsdRules for SetRules {
    const READINGS: &'static [ReadingKind] = &[ReadingKind::Member];

    fn op(name: &str, reading: Reading<'_>) -> Option<SetAdd> {
        let Reading::Member(member) = reading else {
            return None;
        };
        Some(SetAdd::new(name, [member]))
    }
}

/// One kind's aggregating writer as the statsd listener writes to it: the
/// readings it takes, its space and clock (for a `T` time's check), and
/// how a sample goes in. Cheap to clone.
#[derive(Clone)]
pub struct Target(Arc<dyn Take>);

/// [`Target`]'s writer, whatever its kind.
trait Take: Send + Sync {
    fn readings(&self) -> &'static [ReadingKind];
    fn engine(&self) -> &Writer;
    fn space(&self) -> &Arc<Space>;
    fn clock(&self) -> &SharedClock;
    fn try_take(&self, name: &str, sample: Sample<'_>, now: Timestamp) -> Result<()>;
    fn item(&self, name: &str, sample: Sample<'_>, now: Timestamp) -> Result<Item>;
}

impl<R: StatsdRules> Take for SeriesWriter<R> {
    fn readings(&self) -> &'static [ReadingKind] {
        R::READINGS
    }

    fn engine(&self) -> &Writer {
        SeriesWriter::engine(self)
    }

    fn space(&self) -> &Arc<Space> {
        self.service().space()
    }

    fn clock(&self) -> &SharedClock {
        self.service().clock()
    }

    fn try_take(&self, name: &str, sample: Sample<'_>, now: Timestamp) -> Result<()> {
        take(self, name, sample, now)
    }

    fn item(&self, name: &str, sample: Sample<'_>, now: Timestamp) -> Result<Item> {
        let (name, _, delta) = self
            .service()
            .validate(&op::<R>(name, sample.reading)?, now)?;
        let at = plan::time(at(sample), now)?;
        Ok(Item { name, at, delta })
    }
}

impl Target {
    /// The target of `writer`.
    pub fn of<R: StatsdRules>(writer: SeriesWriter<R>) -> Self {
        Target(Arc::new(writer))
    }

    /// The readings it takes.
    pub fn readings(&self) -> &'static [ReadingKind] {
        self.0.readings()
    }

    /// The engine's writer underneath (for
    /// [`crate::engine::writer::try_add_all`]).
    pub fn engine(&self) -> &Writer {
        self.0.engine()
    }

    /// The space written to.
    pub fn space(&self) -> &Arc<Space> {
        self.0.space()
    }

    /// The clock of its "now".
    pub fn now(&self) -> Timestamp {
        self.0.clock().now()
    }

    /// Takes one sample of `name` without ever waiting: fails with
    /// [`Error::Overloaded`] when full, with the rule it breaks when
    /// invalid (nothing taken).
    pub fn try_take(&self, name: &str, sample: Sample<'_>) -> Result<()> {
        self.try_take_at(name, sample, self.now())
    }

    /// [`Target::try_take`] at `now` for a sample without a time (the
    /// listener reads each target's clock once a datagram).
    pub fn try_take_at(&self, name: &str, sample: Sample<'_>, now: Timestamp) -> Result<()> {
        self.0.try_take(name, sample, now)
    }

    /// A sample of `name` validated into the writer's item (`now` for a
    /// sample without a time).
    pub fn item(&self, name: &str, sample: Sample<'_>, now: Timestamp) -> Result<Item> {
        self.0.item(name, sample, now)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("space", &self.space().id)
            .field("readings", &self.readings())
            .finish_non_exhaustive()
    }
}

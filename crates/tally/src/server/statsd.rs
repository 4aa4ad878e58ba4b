//! The statsd UDP listener: lines into the aggregating writers.
//!
//! Each datagram is parsed with [`crate::statsd`]: a line is one name and
//! one or more samples (`hits:1|c:2|c`, DogStatsD's packed `lat:1:2:3|ms`),
//! every sample written under that name. Counter samples go to the
//! counters' writer, timer, histogram and distribution samples to the
//! statistics' writer (a sample rate weighs each value as `round(1/rate)`
//! observations), gauge samples to the gauges' writer (`5` sets, `+5` /
//! `-5` adjust, in the order received), set samples to the sets' writer
//! (the member counted once per slice): which writer takes which reading
//! is said by each space's entry in the registry ([`crate::open::SPACES`],
//! [`crate::statsd::StatsdRules`]), indexed once when the targets are
//! built. A `T` time is the instant a sample
//! is written at, refused as `time_not_kept` when the store of its kind
//! keeps no slice for it ([`crate::statsd::check_time`]).
//!
//! A line is all or nothing. A line of one sample goes to its writer with
//! the writer's `try_` method; a line of several goes to every writer it
//! touches at once ([`crate::engine::writer::try_add_all`]): room is taken
//! in each first, and a merge that fails puts back what the line merged
//! before. UDP has no back pressure, so a full writer refuses the line as
//! `overloaded` instead of waiting. A refused line is counted once, by
//! reason, and logged at debug level; no datagram can stop the listener.
//!
//! Tags (`|#env:prod`) are not kept: a tagged line is written under its
//! bare name, so differently tagged lines add into one series, and every
//! accepted line whose tags were dropped is counted
//! (`tally_statsd_tags_dropped_total`). Container ids and DogStatsD's other
//! origin fields are accepted and not kept.

use std::future::Future;

use tokio::net::UdpSocket;

use super::Metrics;
use super::udp::SocketInfo;
use crate::clock::Timestamp;
use crate::engine::Writer;
use crate::engine::plan::Item;
use crate::engine::writer::try_add_all;
use crate::error::{Error, Result};
use crate::open::SPACES;
use crate::statsd::{Line, Reading, ReadingKind, Reject, Target, check_time, parse_packet};

/// Where the listener's lines go: the aggregating writer of each kind
/// with a statsd type (one [`Target`] per space of the registry,
/// [`crate::open::SPACES`]), indexed by the readings each takes.
#[derive(Clone, Debug)]
pub struct Targets {
    targets: Vec<Target>,
    /// The place in `targets` of the target of each [`ReadingKind`]
    /// ([`ReadingKind::index`]).
    of_reading: [Option<usize>; ReadingKind::COUNT],
}

impl Targets {
    /// The writers of `tally` (each started on first use).
    pub fn of(tally: &crate::Tally) -> Self {
        Targets::new(
            SPACES
                .iter()
                .filter_map(|entry| entry.statsd.map(|target| target(tally))),
        )
    }

    /// These targets; a reading two of them take goes to the first.
    pub fn new(targets: impl IntoIterator<Item = Target>) -> Self {
        let targets: Vec<Target> = targets.into_iter().collect();
        let mut of_reading = [None; ReadingKind::COUNT];
        for (i, target) in targets.iter().enumerate() {
            for reading in target.readings() {
                of_reading[reading.index()].get_or_insert(i);
            }
        }
        Targets {
            targets,
            of_reading,
        }
    }

    /// The target of `reading`'s kind, and its place.
    fn of_reading(&self, reading: &Reading<'_>) -> Result<(usize, &Target)> {
        let i = self.of_reading[reading.kind().index()].ok_or_else(|| {
            Error::InvalidInput(format!("no writer takes {:?} readings", reading.kind()))
        })?;
        Ok((i, &self.targets[i]))
    }
}

/// Receives statsd datagrams on `socket` until `shutdown` completes.
///
/// The datagrams are read on a thread of the listener's own, many per
/// system call ([`super::udp::receive`]), and each is counted there with
/// [`handle`]. The socket is registered with `metrics`, whose `/metrics`
/// then shows its receive buffer and the datagrams the kernel dropped for
/// it. Bind it with [`super::udp::bind`] for a buffer that holds a burst.
pub async fn listen(
    socket: UdpSocket,
    targets: Targets,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    match SocketInfo::of(&socket) {
        Ok(info) => metrics.statsd_socket(info),
        Err(e) => tracing::warn!(error = %e, "statsd socket: no kernel figures for /metrics"),
    }
    let counted = metrics.clone();
    let each = move |packet: &[u8]| {
        counted.statsd_datagrams(1);
        handle(packet, &targets, &counted);
    };
    match super::udp::receive(socket, "statsd", shutdown, each).await {
        Ok(()) => tracing::info!("statsd listener stopped"),
        Err(e) => tracing::error!(error = %e, "statsd listener failed"),
    }
}

/// Hands one datagram's lines to their writers. The lines of a datagram
/// arrived at one instant: each target's clock is read once for all of
/// them (reading it per line was a fifth of the listener's time).
pub fn handle(packet: &[u8], targets: &Targets, metrics: &Metrics) {
    let mut nows = Nows::new(targets);
    for line in parse_packet(packet) {
        let taken = match &line {
            Ok(line) => take(line, targets, &mut nows, metrics),
            Err(reason) => Err(reason.code()),
        };
        if let Err(reason) = taken {
            tracing::debug!(reason, "statsd line rejected");
            metrics.statsd_rejected(reason);
        }
    }
}

/// Hands one line's samples to their writers, all or nothing, and counts
/// it; the reason it was refused otherwise.
fn take(
    line: &Line<'_>,
    targets: &Targets,
    nows: &mut Nows,
    metrics: &Metrics,
) -> Result<(), &'static str> {
    if line.timed {
        targets.check_times(line, nows).map_err(Reject::code)?;
    }
    let counted = if line.len() == 1 {
        targets.take_one(line, nows)
    } else {
        targets.take_all(line, nows)
    }
    .map_err(|e| reason(&e))?;
    metrics.statsd_accepted(1);
    if counted > 0 {
        metrics.increments_accepted(counted);
    }
    if line.tagged {
        metrics.statsd_tags_dropped(1);
    }
    Ok(())
}

/// The reason code of a line a writer refused.
fn reason(e: &Error) -> &'static str {
    match e {
        Error::Overloaded(_) => "overloaded",
        Error::Overflow { .. } => "overflow",
        e => {
            tracing::debug!(error = %e, "statsd line refused");
            "invalid"
        }
    }
}

impl Targets {
    /// Checks the `T` time of every sample of `line` against what the store
    /// of its kind keeps.
    fn check_times(&self, line: &Line<'_>, nows: &mut Nows) -> Result<(), Reject> {
        for sample in line.samples() {
            let Some(at) = sample.at else { continue };
            let Ok((i, target)) = self.of_reading(&sample.reading) else {
                continue; // refused when taken
            };
            check_time(at, nows.of(i, target), &target.space().precisions)?;
        }
        Ok(())
    }

    /// Hands a line of one sample to its writer; the counter increments
    /// taken.
    fn take_one(&self, line: &Line<'_>, nows: &mut Nows) -> Result<u64> {
        let Some(sample) = line.samples().next() else {
            return Ok(0);
        };
        let (i, target) = self.of_reading(&sample.reading)?;
        target.try_take_at(line.name, sample, nows.of(i, target))?;
        Ok(increments(&sample.reading))
    }

    /// Hands a line of several samples to every writer it touches at once,
    /// all or nothing; the counter increments taken. A line with invalid
    /// samples for several writers is refused with the error of the first
    /// writer in the registry's order.
    fn take_all(&self, line: &Line<'_>, nows: &mut Nows) -> Result<u64> {
        let mut items: Vec<Result<Vec<Item>>> =
            self.targets.iter().map(|_| Ok(Vec::new())).collect();
        let mut counted = 0;
        for sample in line.samples() {
            let (i, target) = self.of_reading(&sample.reading)?;
            let Ok(taken) = &mut items[i] else { continue };
            match target.item(line.name, sample, nows.of(i, target)) {
                Ok(item) => taken.push(item),
                Err(e) => items[i] = Err(e),
            }
            counted += increments(&sample.reading);
        }
        let items = items.into_iter().collect::<Result<Vec<_>>>()?;
        let mut parts: Vec<(&Writer, &[Item])> = self
            .targets
            .iter()
            .zip(&items)
            .filter(|(_, items)| !items.is_empty())
            .map(|(target, items)| (target.engine(), items.as_slice()))
            .collect();
        try_add_all(&mut parts)?;
        Ok(counted)
    }
}

/// Each target's "now" for one datagram, read from its clock the first
/// time a line needs it.
struct Nows(Vec<Option<Timestamp>>);

impl Nows {
    fn new(targets: &Targets) -> Self {
        Nows(vec![None; targets.targets.len()])
    }

    /// The now of `target`, the `i`th of the targets.
    fn of(&mut self, i: usize, target: &Target) -> Timestamp {
        *self.0[i].get_or_insert_with(|| target.now())
    }
}

/// The counter increments a reading is (`tally_increments_accepted_total`).
fn increments(reading: &Reading<'_>) -> u64 {
    u64::from(reading.kind() == ReadingKind::Count)
}

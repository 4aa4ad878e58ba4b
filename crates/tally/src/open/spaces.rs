//! The registry of spaces: every service of named series the slice engine
//! carries for an opened [`Tally`], listed once ([`SPACES`]).
//!
//! Opening a [`Tally`] builds each service with its own settings; from then
//! on, whatever goes over every space iterates this list: the cleaner
//! ([`Tally::cleaner`]), shutdown ([`Tally::shutdown`] flushes each started
//! writer), the Graphite source ([`Tally::graphite_source`]), `tally
//! migrate` ([`crate::migrate`]) and the statsd listener's check of a
//! sample's time. A new kind is one entry here (and its service on
//! [`Tally`]).

use std::sync::Arc;

use super::Tally;
use crate::engine::{SliceStore, Space, Writer};
use crate::graphite::{Namespace, Shape};

/// One space of an opened [`Tally`]: its service's store and space, its
/// started writer, its place in the Graphite namespace and in a migration.
pub struct SpaceEntry {
    /// The space's id ([`Space::id`]): `counters`, `stats`, `gauges`, `sets`.
    pub id: &'static str,
    /// The lane of a migration's write ids for this space (stored in the
    /// target's write-id records: never renumber an entry).
    pub lane: u32,
    /// Where its Graphite families come in the source (paths that meet
    /// are answered by the lower rank first).
    pub graphite_rank: u8,
    /// The space of the service.
    pub space: fn(&Tally) -> Arc<Space>,
    /// The store it is kept in.
    pub store: fn(&Tally) -> Arc<dyn SliceStore>,
    /// Its Graphite shapes in a namespace (statistics: a leaf per quantile).
    pub shapes: fn(&Tally, Namespace, &[f64]) -> Vec<Shape>,
    /// Its aggregating writer's engine, if it was started.
    pub started_writer: fn(&Tally) -> Option<Writer>,
}

impl std::fmt::Debug for SpaceEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpaceEntry")
            .field("id", &self.id)
            .field("lane", &self.lane)
            .finish_non_exhaustive()
    }
}

/// Every space, in the order a migration copies them and the cleaner
/// trims them.
pub const SPACES: &[SpaceEntry] = &[
    SpaceEntry {
        id: Space::COUNTERS,
        lane: 0,
        graphite_rank: 0,
        space: |t| t.inner.counters.space().clone(),
        store: |t| t.inner.counters.store().clone(),
        shapes: |t, ns, _| t.inner.counters.graphite_shapes(ns),
        started_writer: |t| t.inner.writer.get().map(|w| w.engine().clone()),
    },
    SpaceEntry {
        id: crate::stats::SPACE,
        lane: 1,
        graphite_rank: 3,
        space: |t| t.inner.stats.space().clone(),
        store: |t| t.inner.stats.store().clone(),
        shapes: |t, ns, quantiles| t.inner.stats.graphite_shapes(ns, quantiles),
        started_writer: |t| t.inner.stats_writer.get().map(|w| w.engine().clone()),
    },
    SpaceEntry {
        id: crate::gauges::SPACE,
        lane: 2,
        graphite_rank: 1,
        space: |t| t.inner.gauges.space().clone(),
        store: |t| t.inner.gauges.store().clone(),
        shapes: |t, ns, _| t.inner.gauges.graphite_shapes(ns),
        started_writer: |t| t.inner.gauges_writer.get().map(|w| w.engine().clone()),
    },
    SpaceEntry {
        id: crate::sets::SPACE,
        lane: 3,
        graphite_rank: 2,
        space: |t| t.inner.sets.space().clone(),
        store: |t| t.inner.sets.store().clone(),
        shapes: |t, ns, _| t.inner.sets.graphite_shapes(ns),
        started_writer: |t| t.inner.sets_writer.get().map(|w| w.engine().clone()),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_name_their_spaces_and_lanes_stay() {
        let tally = Tally::open("sqlite::memory:").await.unwrap();
        for entry in SPACES {
            assert_eq!((entry.space)(&tally).id, entry.id);
        }
        // Lanes are in stored write ids: they never change.
        let lanes: Vec<_> = SPACES.iter().map(|e| (e.id, e.lane)).collect();
        assert_eq!(
            lanes,
            [("counters", 0), ("stats", 1), ("gauges", 2), ("sets", 3)]
        );
    }
}

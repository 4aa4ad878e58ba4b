//! The aggregating writer's tests.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use async_trait::async_trait;

use super::flush::chunk;
use super::*;
use crate::clock::ManualClock;

/// A sink keeping what it applied (per write id, once), failing as told.
#[derive(Default)]
struct Recorder {
    state: Mutex<RecorderState>,
}

#[derive(Default)]
struct RecorderState {
    /// (series, precision, slice) -> total applied.
    totals: BTreeMap<(String, u64, u64), i64>,
    /// Last sequence number per lane.
    lanes: HashMap<(u64, u32), u64>,
    /// Calls to fail as unavailable before succeeding.
    fail_next: u32,
    /// Series whose writes are refused for good.
    refuse: Option<String>,
    calls: u64,
}

#[async_trait]
impl BatchSink for Recorder {
    async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        let mut s = self.state.lock().unwrap();
        s.calls += 1;
        if s.fail_next > 0 {
            s.fail_next -= 1;
            return Err(Error::Unavailable("told to fail".into()));
        }
        if let Some(refused) = &s.refuse
            && batch.writes.iter().any(|w| w.name.as_str() == refused)
        {
            return Err(Error::Overflow {
                kind: "counter",
                name: refused.clone(),
                precision: 1,
                slice: 0,
                delta: 1,
            });
        }
        if let Some(seq) = batch.seq {
            let last = s.lanes.entry((seq.writer, seq.lane)).or_default();
            if seq.seq <= *last {
                return Ok(Applied::Duplicate);
            }
            *last = seq.seq;
        }
        for w in &batch.writes {
            for c in &w.cells {
                *s.totals
                    .entry((w.name.to_string(), c.precision, c.slice))
                    .or_default() += c.delta.as_sum().unwrap();
            }
        }
        Ok(Applied::Written)
    }
}

/// A space other than counters: the writer serves any.
fn space() -> Arc<Space> {
    Space::visits(&[1, 10], 100)
}

fn start(sink: Arc<Recorder>, settings: WriterSettings) -> Writer {
    Writer::start(sink, space(), Arc::new(ManualClock::at(1000.0)), settings).unwrap()
}

fn item(name: &str, at: f64, sum: i64) -> Item {
    Item {
        name: Name::new(name).unwrap(),
        at: Timestamp::from_secs_f64(at).unwrap(),
        delta: Value::Sum(sum),
    }
}

#[tokio::test]
async fn deltas_are_merged_by_second_and_written_at_every_resolution() {
    let sink = Arc::new(Recorder::default());
    let w = start(sink.clone(), WriterSettings::default());
    w.try_add("a", Value::Sum(2), Some(1001.5)).unwrap();
    w.try_add("a", Value::Sum(3), Some(1001.0)).unwrap();
    w.try_add("a", Value::Sum(4), Some(1009.0)).unwrap();
    w.try_add("b", Value::Sum(-1), None).unwrap();
    assert_eq!(w.stats().pending_entries, 3);
    w.flush().await.unwrap();
    let totals = sink.state.lock().unwrap().totals.clone();
    let want: BTreeMap<(String, u64, u64), i64> = [
        (("a".to_owned(), 1, 1001), 5),
        (("a".to_owned(), 1, 1009), 4),
        (("a".to_owned(), 10, 1000), 9),
        (("b".to_owned(), 1, 1000), -1),
        (("b".to_owned(), 10, 1000), -1),
    ]
    .into_iter()
    .collect();
    assert_eq!(totals, want);
    let stats = w.stats();
    assert_eq!(
        (stats.accepted, stats.written, stats.pending_entries),
        (4, 4, 0)
    );
    w.shutdown().await;
    assert!(matches!(
        w.try_add("a", Value::Sum(1), None),
        Err(Error::Overloaded(_))
    ));
}

/// Regression (a keyed aggregated increment lost across a SIGTERM in CI):
/// `add_many` never looked at `closed`, and `try_add` looked before taking
/// its shard's lock, so an add racing the final flush could be accepted
/// after the last table was taken and never written. Now every add racing
/// a shutdown is either written or refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_racing_the_shutdown_is_written_or_refused() {
    for round in 0..20 {
        let sink = Arc::new(Recorder::default());
        let w = start(sink.clone(), WriterSettings::default());
        let finished = Arc::new(AtomicBool::new(false));
        let adders: Vec<_> = (0..3)
            .map(|t| {
                let (w, finished) = (w.clone(), finished.clone());
                tokio::spawn(async move {
                    let mut accepted = 0i64;
                    for i in 0.. {
                        // Adds during the shutdown, and one after it: each
                        // is refused, or written by the final flush.
                        let last = finished.load(Ordering::Acquire);
                        let name = format!("s{}", i % 50);
                        let ok = match t {
                            0 => w.try_add(&name, Value::Sum(1), Some(1000.0)).is_ok(),
                            1 => w.add_many(&[item(&name, 1000.0, 1)]).await.is_ok(),
                            _ => {
                                let batch = [item(&name, 1000.0, 1)];
                                try_add_all(&mut [(&w, &batch[..])]).is_ok()
                            }
                        };
                        if ok {
                            accepted += 1;
                        }
                        if last {
                            break;
                        }
                        if i % 64 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    accepted
                })
            })
            .collect();
        // Shut down a few ms after the first accepted add (a fixed wait
        // from the spawn could pass before a loaded machine runs an adder).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while w.stats().accepted == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: no add ran"
            );
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(round % 5)).await;
        w.shutdown().await;
        finished.store(true, Ordering::Release);
        let mut accepted = 0;
        for a in adders {
            accepted += a.await.unwrap();
        }
        let written: i64 = sink
            .state
            .lock()
            .unwrap()
            .totals
            .iter()
            .filter(|((_, precision, _), _)| *precision == 1)
            .map(|(_, n)| n)
            .sum();
        assert!(
            accepted > 0,
            "round {round}: nothing was added before the shutdown"
        );
        assert_eq!(written, accepted, "round {round}: accepted but not written");
    }
}

/// Regression: a flush after a burst of timestamped writes (carbon
/// lines) sent chunks of hundreds of thousands of cells, one store call
/// each, past the client's timeout.
#[test]
fn chunks_are_bounded_in_series_and_in_cells() {
    let write = |name: &str, cells: u64| {
        (
            SeriesWrite {
                name: Name::new(name).unwrap(),
                cells: (0..cells)
                    .map(|slice| CellDelta {
                        precision: 1,
                        slice,
                        delta: Value::Sum(1),
                    })
                    .collect(),
            },
            cells,
        )
    };
    let writes = vec![
        write("a", 4),
        write("b", 4),
        write("c", 3),
        write("d", 25),
        write("e", 1),
        write("f", 1),
        write("g", 1),
    ];
    let shape: Vec<Vec<usize>> = chunk(writes, 3, 10)
        .iter()
        .map(|c| c.writes.iter().map(|w| w.cells.len()).collect())
        .collect();
    assert_eq!(shape, vec![vec![4, 4], vec![3], vec![25], vec![1, 1, 1]]);
    let adds: Vec<u64> = chunk(vec![write("x", 2), write("y", 3)], 3, 10)
        .into_iter()
        .flat_map(|c| c.adds)
        .collect();
    assert_eq!(adds, vec![2, 3]);
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_merged() {
    let sink = Arc::new(Recorder::default());
    let w = start(sink.clone(), WriterSettings::default());
    assert!(matches!(
        w.try_add("", Value::Sum(1), None),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        w.try_add("a", Value::Sum(i64::MIN), None),
        Err(Error::InvalidCount(_))
    ));
    assert!(matches!(
        w.try_add("a", Value::Sum(1), Some(f64::NAN)),
        Err(Error::InvalidTime(_))
    ));
    assert_eq!(w.stats().pending_entries, 0);
}

/// add_many is all or nothing: an item that would overflow its pending
/// entry puts back every entry the batch touched, made or merged.
#[tokio::test]
async fn a_refused_batch_puts_every_entry_back() {
    let sink = Arc::new(Recorder::default());
    let w = start(sink.clone(), WriterSettings::default());
    w.try_add("a", Value::Sum(7), Some(1000.0)).unwrap();
    w.try_add("z", Value::Sum(i64::MAX - 1), Some(1000.0))
        .unwrap();
    let err = w
        .add_many(&[
            item("a", 1000.0, 1),   // merged into a waiting entry
            item("new", 1001.0, 5), // a new entry
            item("new", 1001.0, 5), // merged into the entry the batch made
            item("z", 1000.0, 2),   // overflows
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Overflow { name, slice: 1000, .. } if name == "z"),
        "{err}"
    );
    assert_eq!(w.stats().pending_entries, 2);
    assert_eq!(w.stats().accepted, 2);
    w.add_many(&[item("a", 1000.0, 1), item("b", 1000.0, 1)])
        .await
        .unwrap();
    w.flush().await.unwrap();
    let totals = sink.state.lock().unwrap().totals.clone();
    assert_eq!(totals[&("a".to_owned(), 1, 1000)], 8);
    assert_eq!(totals[&("b".to_owned(), 1, 1000)], 1);
    assert!(!totals.keys().any(|k| k.0 == "new"));
    assert_eq!(w.stats().written, 4);
}

/// try_add_all is all or nothing over several writers (a statsd line
/// whose samples go to several): a merge that fails in one puts back
/// what the others merged, and a writer without room stops every part.
#[tokio::test]
async fn adding_to_several_writers_is_all_or_nothing() {
    let (sink_a, sink_b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let a = start(sink_a.clone(), WriterSettings::default());
    let b = start(sink_b.clone(), WriterSettings::default());
    a.try_add("a", Value::Sum(7), Some(1000.0)).unwrap();
    b.try_add("z", Value::Sum(i64::MAX - 1), Some(1000.0))
        .unwrap();
    let to_a = [item("a", 1000.0, 1), item("new", 1001.0, 5)];
    let overflows = [item("q", 1000.0, 1), item("z", 1000.0, 2)];
    // Whichever order the parts come in, b's overflow undoes a's part.
    for flip in [false, true] {
        let mut parts = [(&a, &to_a[..]), (&b, &overflows[..])];
        if flip {
            parts.reverse();
        }
        let err = try_add_all(&mut parts).unwrap_err();
        assert!(
            matches!(&err, Error::Overflow { name, .. } if name == "z"),
            "{err}"
        );
        assert_eq!((a.stats().pending_entries, a.stats().accepted), (1, 1));
        assert_eq!((b.stats().pending_entries, b.stats().accepted), (1, 1));
    }
    // A writer with no room: nothing is merged anywhere.
    let full = start(
        Arc::new(Recorder::default()),
        WriterSettings {
            max_entries: 1,
            flush_entries: 1,
            flush_interval: Duration::from_secs(3600),
            when_full: WhenFull::Error,
            ..WriterSettings::default()
        },
    );
    full.try_add("f", Value::Sum(1), Some(1000.0)).unwrap();
    let err =
        try_add_all(&mut [(&a, &to_a[..]), (&full, &[item("g", 1000.0, 1)][..])]).unwrap_err();
    assert!(matches!(err, Error::Overloaded(_)), "{err}");
    assert_eq!((a.stats().pending_entries, a.stats().accepted), (1, 1));
    assert_eq!(full.stats().pending_entries, 1);
    // One writer twice is refused before anything is taken.
    let err = try_add_all(&mut [(&a, &to_a[..]), (&a.clone(), &to_a[..])]).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    // Both parts fit: both are merged, and written.
    try_add_all(&mut [(&b, &[item("q", 1000.0, 1)][..]), (&a, &to_a[..])]).unwrap();
    assert_eq!((a.stats().pending_entries, a.stats().accepted), (2, 3));
    assert_eq!((b.stats().pending_entries, b.stats().accepted), (2, 2));
    a.flush().await.unwrap();
    b.flush().await.unwrap();
    let totals = sink_a.state.lock().unwrap().totals.clone();
    assert_eq!(totals[&("a".to_owned(), 1, 1000)], 8);
    assert_eq!(totals[&("new".to_owned(), 1, 1001)], 5);
    assert_eq!(
        sink_b.state.lock().unwrap().totals[&("q".to_owned(), 1, 1000)],
        1
    );
}

/// A chunk that fails as unavailable is retried with the same write id:
/// written once, however many attempts it took.
#[tokio::test]
async fn retried_chunks_are_written_once() {
    let sink = Arc::new(Recorder::default());
    sink.state.lock().unwrap().fail_next = 3;
    let w = start(
        sink.clone(),
        WriterSettings {
            chunk_counters: 2,
            lanes: 2,
            ..WriterSettings::default()
        },
    );
    for i in 0..10 {
        w.try_add(&format!("s{i}"), Value::Sum(1), Some(1000.0))
            .unwrap();
    }
    w.flush().await.unwrap();
    let s = sink.state.lock().unwrap();
    assert_eq!(s.totals.len(), 20);
    assert!(s.totals.values().all(|&t| t == 1));
    let stats = w.stats();
    assert_eq!(stats.retries, 3);
    assert_eq!(stats.written, 10);
    assert_eq!(stats.chunks, 5);
}

/// A chunk refused for good is written series by series; only the
/// refused series' deltas are dropped and counted.
#[tokio::test]
async fn a_refused_chunk_loses_only_the_refused_series() {
    let sink = Arc::new(Recorder::default());
    sink.state.lock().unwrap().refuse = Some("bad".into());
    let w = start(sink.clone(), WriterSettings::default());
    for name in ["a", "bad", "c"] {
        w.try_add(name, Value::Sum(1), Some(1000.0)).unwrap();
        w.try_add(name, Value::Sum(1), Some(1000.0)).unwrap();
    }
    w.flush().await.unwrap();
    let s = sink.state.lock().unwrap();
    assert_eq!(s.totals[&("a".to_owned(), 10, 1000)], 2);
    assert_eq!(s.totals[&("c".to_owned(), 10, 1000)], 2);
    assert!(!s.totals.keys().any(|k| k.0 == "bad"));
    let stats = w.stats();
    assert_eq!((stats.written, stats.rejected), (4, 2));
}

#[tokio::test]
async fn a_full_table_refuses_or_waits() {
    let sink = Arc::new(Recorder::default());
    let settings = WriterSettings {
        max_entries: 2,
        flush_entries: 2,
        flush_interval: Duration::from_secs(3600),
        when_full: WhenFull::Error,
        ..WriterSettings::default()
    };
    let w = start(sink.clone(), settings.clone());
    w.try_add("a", Value::Sum(1), Some(1000.0)).unwrap();
    w.try_add("a", Value::Sum(1), Some(1001.0)).unwrap();
    // Merging into a waiting entry takes no room; a new one has none.
    w.try_add("a", Value::Sum(1), Some(1001.0)).unwrap();
    assert!(matches!(
        w.add("b", Value::Sum(1), Some(1000.0)).await,
        Err(Error::Overloaded(_))
    ));
    assert!(matches!(
        w.add_many(&[item("c", 1000.0, 1)]).await,
        Err(Error::Overloaded(_))
    ));
    // Waiting: the add asks for a flush and goes in once it made room.
    let wait = start(
        sink.clone(),
        WriterSettings {
            when_full: WhenFull::Wait,
            ..settings
        },
    );
    wait.try_add("a", Value::Sum(1), Some(1000.0)).unwrap();
    wait.try_add("b", Value::Sum(1), Some(1000.0)).unwrap();
    tokio::time::timeout(
        tally_testkit::PATIENCE,
        wait.add("c", Value::Sum(1), Some(1000.0)),
    )
    .await
    .expect("room made by a flush")
    .unwrap();
    wait.shutdown().await;
    assert_eq!(wait.stats().written, 3);
}

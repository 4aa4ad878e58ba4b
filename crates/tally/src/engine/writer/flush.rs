//! The flusher: the aggregating writer's background task. Each flush
//! takes the pending table, expands it into one delta per (series,
//! precision, slice), cuts it into chunks and writes each chunk on a lane
//! with its own write id, retrying an unavailable backend.

use super::*;

/// The flusher task: flushes on its interval, when asked, when the table
/// fills, and once more when closed.
pub(super) async fn flusher(inner: Arc<Inner>, control: mpsc::UnboundedReceiver<Control>) {
    let lanes = Lanes::new(inner.base.writer, inner.base.settings.lanes);
    run_flusher(&inner.base, control, lanes, |lanes, deadline| {
        flush_once(inner.clone(), lanes, deadline)
    })
    .await
}

/// The next sequence number of each lane of this writer.
struct Lanes {
    writer: u64,
    next: Vec<u64>,
}

impl Lanes {
    fn new(writer: u64, lanes: usize) -> Self {
        Lanes {
            writer,
            next: vec![1; lanes],
        }
    }
}

/// One lane's numbering during a flush: numbers are taken in the order the
/// lane sends its writes, so a lane never sends n + 1 before n succeeded.
struct Lane {
    writer: u64,
    lane: u32,
    next: u64,
}

impl Lane {
    fn take(&mut self) -> WriteSeq {
        let seq = WriteSeq {
            writer: self.writer,
            lane: self.lane,
            seq: self.next,
        };
        self.next += 1;
        seq
    }
}

/// A chunk: series writes and, for each, the adds it stands for.
pub(super) struct Chunk {
    pub(super) writes: Vec<SeriesWrite>,
    pub(super) adds: Vec<u64>,
}

/// Takes everything waiting and writes it; gives the lanes back.
async fn flush_once(inner: Arc<Inner>, mut lanes: Lanes, deadline: Option<Instant>) -> Lanes {
    let started = Instant::now();
    let taken = inner.shards.take_all(|shard| &mut shard.table);
    if taken.is_empty() {
        return lanes;
    }
    let entries: usize = taken.iter().map(|(_, p)| p.seconds.len()).sum();
    let adds: u64 = taken.iter().map(|(_, p)| p.adds()).sum();
    let mut lost = 0;
    let mut writes: Vec<(SeriesWrite, u64)> = Vec::with_capacity(taken.len());
    for (name, pending) in taken {
        let n = pending.adds();
        match expand(name, pending, &inner.space) {
            Ok(write) => writes.push((write, n)),
            Err(e) => {
                tracing::error!(error = %e, adds = n, space = inner.space.id,
                    "these deltas could not be merged into slices and are dropped");
                inner.base.rejected.fetch_add(n, Ordering::Relaxed);
                lost += n;
            }
        }
    }
    writes.sort_unstable_by(|a, b| a.0.name.cmp(&b.0.name));
    // Deal chunks to lanes round-robin; each lane writes its chunks in order.
    let chunks = chunk(writes, inner.base.settings.chunk_counters, MAX_CHUNK_CELLS);
    let n_lanes = inner.base.settings.lanes.min(chunks.len());
    let mut per_lane: Vec<Vec<Chunk>> = (0..n_lanes).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks.into_iter().enumerate() {
        per_lane[i % n_lanes].push(chunk);
    }
    let results = futures::future::join_all(per_lane.into_iter().enumerate().map(|(i, chunks)| {
        let inner = inner.clone();
        let mut lane = Lane {
            writer: lanes.writer,
            lane: i as u32,
            next: lanes.next[i],
        };
        async move {
            let mut lost = 0u64;
            for chunk in chunks {
                lost += write_chunk(&inner, &mut lane, chunk, deadline).await;
            }
            (lane.next, lost)
        }
    }))
    .await;
    for (i, (next, l)) in results.into_iter().enumerate() {
        lanes.next[i] = next;
        lost += l;
    }
    let took = started.elapsed();
    inner.base.flushed(entries, adds - lost, took);
    inner.flush_latency.observe(took);
    lanes
}

/// Cuts name-ordered series writes into chunks of at most `series` series
/// and `cells` cells (a series with more cells alone in its chunk).
pub(super) fn chunk(writes: Vec<(SeriesWrite, u64)>, series: usize, cells: usize) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current = Chunk {
        writes: Vec::new(),
        adds: Vec::new(),
    };
    let mut held = 0;
    for (write, adds) in writes {
        let n = write.cells.len();
        if !current.writes.is_empty() && (current.writes.len() >= series || held + n > cells) {
            chunks.push(std::mem::replace(
                &mut current,
                Chunk {
                    writes: Vec::new(),
                    adds: Vec::new(),
                },
            ));
            held = 0;
        }
        held += n;
        current.writes.push(write);
        current.adds.push(adds);
    }
    if !current.writes.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Folds `delta` into a slice's delta at flush. Sums are clamped into their
/// range: a slice's total can only leave it if the stored count would too,
/// so the store refuses it either way, and clamping keeps the rest of the
/// series writable. Other kinds merge (and may fail).
#[inline]
fn fold(into: &mut Value, delta: &Value) -> Result<()> {
    match (into, delta) {
        (Value::Sum(a), Value::Sum(b)) => {
            *a = sum::add_clamped(*a, *b);
            Ok(())
        }
        (into, delta) => into.merge(delta),
    }
}

/// One series' waiting seconds as one delta per (precision, slice).
fn expand(name: Box<str>, pending: Pending, space: &Space) -> Result<SeriesWrite> {
    let mut cells: Vec<CellDelta> =
        Vec::with_capacity(pending.seconds.len() * space.precisions.len());
    for r in &space.precisions {
        let start = cells.len();
        for slot in &pending.seconds {
            let slice = r.slice_of_second(slot.second);
            match cells[start..].iter_mut().find(|c| c.slice == slice) {
                Some(c) => fold(&mut c.delta, &slot.delta)
                    .map_err(|e| locate(e, space, &name, r.seconds, slice))?,
                None => cells.push(CellDelta {
                    precision: r.seconds,
                    slice,
                    delta: slot.delta.clone(),
                }),
            }
        }
        cells[start..].sort_unstable_by_key(|c| c.slice);
    }
    Ok(SeriesWrite {
        name: Name::from_checked(name.into_string()),
        cells,
    })
}

/// Writes `batch`, retrying a retryable failure with the same sequence
/// number until it is acknowledged or `deadline` passes.
async fn write_retrying(
    inner: &Inner,
    batch: &Batch,
    deadline: Option<Instant>,
) -> Result<Applied> {
    let mut backoff = Backoff::new();
    loop {
        match inner.sink.apply_batch(batch).await {
            Ok(applied) => {
                inner.base.chunks.fetch_add(1, Ordering::Relaxed);
                if applied == Applied::Duplicate {
                    inner.base.duplicates.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(applied);
            }
            Err(e) if retryable(&e) => {
                inner.base.retries.fetch_add(1, Ordering::Relaxed);
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(e);
                }
                tracing::warn!(error = %e, retry_in_ms = backoff.next_ms(), "flush failed; retrying");
                backoff.wait().await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes one chunk on `lane`; returns the adds lost (refused for good, or
/// given up at shutdown).
async fn write_chunk(
    inner: &Inner,
    lane: &mut Lane,
    chunk: Chunk,
    deadline: Option<Instant>,
) -> u64 {
    let batch = Batch {
        space: inner.space.clone(),
        writes: chunk.writes,
        seq: Some(lane.take()),
    };
    match write_retrying(inner, &batch, deadline).await {
        Ok(_) => 0,
        Err(e) if retryable(&e) => {
            let lost: u64 = chunk.adds.iter().sum();
            tracing::error!(error = %e, increments = lost,
                "stopping with the backend unavailable: these unflushed increments are lost");
            lost
        }
        Err(e) => {
            // Refused for good (a slice would overflow): nothing of the chunk
            // was written, so write each series alone, with the lane's next
            // numbers, and drop only those the store refuses.
            tracing::warn!(error = %e, counters = batch.writes.len(), "flush refused; writing counter by counter");
            let mut lost = 0;
            for (write, adds) in batch.writes.into_iter().zip(chunk.adds) {
                let name = write.name.clone();
                let single = Batch {
                    space: inner.space.clone(),
                    writes: vec![write],
                    seq: Some(lane.take()),
                };
                if let Err(e) = write_retrying(inner, &single, deadline).await {
                    if !retryable(&e) {
                        inner.base.rejected.fetch_add(adds, Ordering::Relaxed);
                    }
                    tracing::error!(error = %e, counter = %name, increments = adds,
                        "these increments could not be written and are dropped");
                    lost += adds;
                }
            }
            lost
        }
    }
}

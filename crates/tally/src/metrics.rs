//! Lock-free figures for Prometheus: a latency [`Histogram`], and writers of
//! the text exposition format.
//!
//! Owns only the arithmetic and the text; what is measured (requests,
//! flushes, cleaner passes...) is decided by the services that hold these.
//! Invariant: a histogram's buckets are cumulative when rendered, and its
//! count equals the `+Inf` bucket.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, seconds.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

/// A latency histogram over [`LATENCY_BUCKETS`].
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

/// A histogram's figures at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HistogramSnapshot {
    /// Observations per bucket (not cumulative), in [`LATENCY_BUCKETS`] order.
    pub buckets: Vec<u64>,
    /// Observations in all.
    pub count: u64,
    /// Sum of the observations, microseconds.
    pub sum_micros: u64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            d.as_micros().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }

    /// The figures now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum_micros: self.sum_micros.load(Ordering::Relaxed),
        }
    }
}

/// Appends Prometheus text, family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// A counter family: one sample per label set.
    pub fn counter(&mut self, name: &str, help: &str, samples: &[(Vec<(&str, String)>, u64)]) {
        self.header(name, "counter", help);
        for (labels, value) in samples {
            let _ = writeln!(self.text, "{name}{} {value}", render_labels(labels));
        }
    }

    /// A counter family with no labels.
    pub fn counter1(&mut self, name: &str, help: &str, value: u64) {
        self.counter(name, help, &[(Vec::new(), value)]);
    }

    /// A gauge with no labels.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.header(name, "gauge", help);
        let _ = writeln!(self.text, "{name} {}", number(value));
    }

    /// A histogram (in seconds) with no labels.
    pub fn histogram(&mut self, name: &str, help: &str, h: &HistogramSnapshot) {
        self.header(name, "histogram", help);
        let mut cumulative = 0;
        for (bound, n) in LATENCY_BUCKETS.iter().zip(&h.buckets) {
            cumulative += n;
            let _ = writeln!(
                self.text,
                "{name}_bucket{{le=\"{}\"}} {cumulative}",
                number(*bound)
            );
        }
        let _ = writeln!(self.text, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(
            self.text,
            "{name}_sum {}",
            number(h.sum_micros as f64 / 1e6)
        );
        let _ = writeln!(self.text, "{name}_count {}", h.count);
    }

    /// The text.
    pub fn finish(self) -> String {
        self.text
    }
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else if v > 0.0 {
        "+Inf".into()
    } else {
        "-Inf".into()
    }
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

fn render_labels(labels: &[(&str, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(100));
        let snap = h.snapshot();
        assert_eq!(snap.count, 3);
        let mut e = Exposition::new();
        e.histogram("x_seconds", "help", &snap);
        let text = e.finish();
        assert!(
            text.contains("x_seconds_bucket{le=\"0.0005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("x_seconds_bucket{le=\"0.005\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("x_seconds_bucket{le=\"30\"} 2\n"), "{text}");
        assert!(text.contains("x_seconds_bucket{le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("x_seconds_count 3\n"), "{text}");
    }

    #[test]
    fn labels_are_escaped() {
        let mut e = Exposition::new();
        e.counter(
            "c_total",
            "a \\ help\nline",
            &[(vec![("route", "a\"b\\c\nd".into())], 2)],
        );
        let text = e.finish();
        assert!(text.contains(r#"c_total{route="a\"b\\c\nd"} 2"#), "{text}");
        assert!(text.contains(r"# HELP c_total a \\ help\nline"), "{text}");
    }
}

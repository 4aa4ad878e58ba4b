//! The limits a request must stay within (series fetched, datapoints answered, nodes
//! found); past one, a 400 naming it.

/// The limits a request must stay within; past one, a 400 naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Series fetched by one render request, over all its reads.
    pub max_series: usize,
    /// Datapoints in one render answer, over all its series.
    pub max_points: usize,
    /// Nodes one `/metrics/find` (or each `/metrics/expand` query) may match.
    pub max_find: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_series: 10_000,
            max_points: 10_000_000,
            max_find: 100_000,
        }
    }
}

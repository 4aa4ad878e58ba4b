//! The harness's integration tests, one test binary (`cargo nextest run -p
//! tally-testkit --test tally-testkit -E 'test(/^cluster::/)'` runs one
//! module): a real Redis Cluster, a redis-server's restart, and the
//! reference Graphite.

mod cluster;
mod graphite_web;
mod restart;

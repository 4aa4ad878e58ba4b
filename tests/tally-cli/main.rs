//! The `tally` command end to end, one test binary (`cargo nextest run -p
//! tally-cli --test tally-cli cli_help::` runs one module): the built binary
//! run as a user runs it (`support`), `tally serve` over HTTP and UDP, the
//! dashboard in a browser, Grafana's requests, schemathesis against the API
//! (`../fuzz/schemathesis.toml`), and `tally bench`'s smoke runs (with the
//! `bench` feature).

mod support;

mod api_fuzz;
#[cfg(feature = "bench")]
mod bench_smoke;
mod cli;
mod cli_help;
mod cli_stores;
mod dashboard;
mod flush;
mod grafana;
mod graphite_serve;
mod idempotency;
mod limits_cli;
mod serve;

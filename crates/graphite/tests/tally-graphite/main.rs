//! The crate's integration tests, one test binary (`cargo nextest run -p
//! tally-graphite --test tally-graphite -E 'test(/^graphite_web::/)'` runs
//! one module): its answers against graphite-web 1.1.10's, recorded
//! (`../fixtures/`, made by `../oracle/`) and live, and its own behaviour
//! beyond them. `common` is the in-memory whisper store and the fixtures'
//! replay.

mod common;

mod combine_functions;
mod evaluation;
mod graphite_web;
mod graphite_web_transform;
mod live_graphite_web;
mod live_graphite_web_transform;
mod transform_behaviour;

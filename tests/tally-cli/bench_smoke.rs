//! A smoke run of every `tally bench` subcommand at tiny sizes: each must
//! run to the end and report that its exactness check passed. No speed is
//! asserted here (the machine is shared; figures live in BENCHMARKS.md).

use crate::support;

use serde_json::Value;
use support::{ok, tally};

/// Runs `tally bench <command> --json`, `command` split at white space,
/// and parses its one line of JSON.
fn bench(command: &str) -> Value {
    bench_args(command.split_whitespace())
}

/// The same with the arguments given one by one (a path may hold spaces).
fn bench_args<'a>(args: impl IntoIterator<Item = &'a str>) -> Value {
    let mut cmd = tally();
    cmd.arg("bench").args(args).arg("--json");
    let out = ok(&mut cmd);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The short, light load of the `ingest` and `stats` runs.
const LIGHT_LOAD: &str = "--seconds 0.2 --writers 4 --batch 10 --book-connections 2";

/// Whether a figure of the report is a number above 0.
fn positive(figure: &Value) -> bool {
    figure.as_f64().unwrap() > 0.0
}

/// Every run of `runs` says `exact` is true and sent some `items`.
fn each_exact_and_sent(runs: &[Value], exact: &str, items: &str) {
    for run in runs {
        assert_eq!(run[exact], true, "{run}");
        assert!(run[items].as_u64().unwrap() > 0, "{run}");
    }
}

#[test]
fn ingest_checks_its_totals_on_both_backends() {
    let r = bench(&format!(
        "ingest --counters 1,10 {LIGHT_LOAD} --benchmark-requests 20000"
    ));
    assert_eq!(r["bench"], "ingest");
    let runs = r["runs"].as_array().unwrap();
    // 2 backends x 2 sizes x 3 modes, each checked exact.
    assert_eq!(runs.len(), 12, "{r}");
    each_exact_and_sent(runs, "totals_exact", "increments");
    let redis = &r["redis"];
    assert!(positive(&redis["hincrby_ops_per_second"][0]));
    assert_eq!(redis["book"]["totals_exact"], true);
    assert!(runs[0]["ratio_to_book"].as_f64().is_some());
    // Beside each Redis run, the bare client, its totals checked; none
    // beside SQLite.
    for run in runs {
        let bare = &run["bare"];
        if run["backend"] == "redis" {
            assert!(bare["increments"].as_u64().unwrap() > 0, "{run}");
            assert!(positive(&run["ratio_to_bare"]), "{run}");
            assert!(
                bare["client_cpu_us_per_increment"].as_f64().is_some(),
                "{run}"
            );
            // Where Redis's time went: Tally's scripts, the bare HINCRBYs.
            let us = |of: &Value, command: &str| {
                of["commands_us_per_increment"][command]
                    .as_f64()
                    .unwrap_or(0.0)
            };
            assert!(us(bare, "hincrby") > 0.0, "{run}");
            assert!(us(run, "evalsha") > 0.0, "{run}");
        } else {
            assert!(bare.is_null(), "{run}");
        }
        assert!(
            run["client_cpu_us_per_increment"].as_f64().is_some(),
            "{run}"
        );
    }
}

#[test]
fn ingest_runs_in_the_compact_layout_next_to_its_own_commands() {
    let r = bench(&format!(
        "ingest --backend redis --key-layout compact --counters 10 \
         --modes exact-batch,aggregated {LIGHT_LOAD} --benchmark-requests 20000"
    ));
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{r}");
    each_exact_and_sent(runs, "totals_exact", "increments");
    for run in runs {
        // The bare client's totals were read back through Tally's compact
        // layout, so its commands wrote that layout's keys and fields.
        assert_eq!(run["bare"]["layout"], "compact", "{run}");
        assert!(run["bare"]["increments"].as_u64().unwrap() > 0, "{run}");
    }
}

#[test]
fn ingest_measures_daily_views_next_to_the_articles_commands() {
    let r = bench(&format!(
        "ingest --daily-entities 2000 --daily-only {LIGHT_LOAD}"
    ));
    assert_eq!(r["bench"], "ingest");
    assert!(r["runs"].as_array().unwrap().is_empty(), "{r}");
    let daily = &r["daily"];
    assert_eq!(daily["entities"], 2000, "{r}");
    assert_eq!(daily["zipf_s"], 1.1, "{r}");
    let runs = daily["runs"].as_array().unwrap();
    let modes: Vec<&str> = runs.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(
        modes,
        [
            "exact",
            "aggregated",
            "exact-running",
            "aggregated-running",
            "bare"
        ],
        "{r}"
    );
    each_exact_and_sent(runs, "totals_exact", "views");
    for run in runs {
        for field in [
            "views_per_second",
            "redis_cpu_us_per_view",
            "client_cpu_us_per_view",
        ] {
            assert!(positive(&run[field]), "{field}: {run}");
        }
        assert!(run["checked_entities"].as_u64().unwrap() > 0, "{run}");
        assert!(run["checked_views"].as_u64().unwrap() > 0, "{run}");
        // Where Redis's time went: Tally's script, the bare HINCRBYs.
        let command = if run["mode"] == "bare" {
            "hincrby"
        } else {
            "evalsha"
        };
        assert!(positive(&run["commands_us_per_view"][command]), "{run}");
    }
    let writer = &runs[1]["writer"];
    assert_eq!(writer["written"], writer["accepted"], "{r}");
    assert!(positive(&daily["exact_ratio_to_bare"]), "{r}");
    assert!(positive(&daily["aggregated_ratio_to_bare"]), "{r}");
    assert!(positive(&daily["exact_running_ratio_to_bare"]), "{r}");
    assert!(positive(&daily["aggregated_running_ratio_to_bare"]), "{r}");
}

#[test]
fn read_reads_back_the_steady_state() {
    let r = bench("read --iterations 10");
    let runs = r["runs"].as_array().unwrap();
    // Redis in the default and the expiring layout, then SQLite.
    assert_eq!(runs.len(), 6, "{r}");
    assert_eq!(runs[0]["samples_per_read"], 840);
    assert_eq!(runs[1]["samples_per_read"], 84_000);
    assert!(runs[0]["raw_p99_us"].as_f64().is_some());
    assert_eq!(runs[2]["layout"], "expiring", "{r}");
    assert_eq!(runs[3]["samples_per_read"], 84_000);
    assert!(positive(&runs[5]["p99_us"]));
    assert!(positive(&r["expiring_p99_ratio_to_default"]), "{r}");
    // The server's time per read, in both layouts, and its ratio.
    assert!(positive(&runs[0]["redis_us_per_read"]), "{r}");
    assert!(positive(&runs[2]["redis_us_per_read"]), "{r}");
    assert!(runs[2]["raw_p99_us"].is_null(), "{r}");
    assert!(positive(&r["expiring_redis_ratio_to_default"]), "{r}");
    assert!(positive(&r["expiring_p50_ratio_to_default"]), "{r}");
}

#[test]
fn memory_checks_the_samples_and_their_encoding() {
    let r = bench("memory --counters 30");
    assert_eq!(r["samples_held"], 30 * 7 * 120);
    assert!(r["tally"]["listpack_checked"].as_u64().unwrap() > 0, "{r}");
    assert!(positive(&r["book"]["bytes_per_sample"]));
    // The expiring layout: every sampled counter read back whole.
    assert_eq!(r["expiring"]["listpack_checked"], 30 * 7, "{r}");
    assert!(positive(&r["expiring_ratio_to_default"]), "{r}");
    // Counted once: every sampled counter read back, one key per counter
    // (and its registry shards) in the compact layout, seven in the default.
    assert_eq!(r["once_compact"]["checked"], 30, "{r}");
    assert_eq!(r["once_default"]["checked"], 30, "{r}");
    let keys = |l: &str| r[l]["keys_per_counter"].as_f64().unwrap();
    assert!(
        keys("once_compact") < 3.0 && keys("once_default") > 7.0,
        "{r}"
    );
}

#[test]
fn stats_checks_its_counts_quantiles_and_busy_stat() {
    let r = bench(&format!(
        "stats --stats 1,10 {LIGHT_LOAD} --quantile-values 2000 --iterations 2 \
         --accuracies 0.005,0.02"
    ));
    assert_eq!(r["bench"], "stats");
    let runs = r["runs"].as_array().unwrap();
    // 2 sizes x (book, bare, exact, aggregated), each count checked exact
    // (the bare client's: each statistic it wrote is registered).
    assert_eq!(runs.len(), 8, "{r}");
    each_exact_and_sent(runs, "counts_exact", "observations");
    for run in runs {
        assert!(positive(&run["ratio_to_book"]), "{run}");
        // Exact writes are measured against the bare client's commands.
        assert_eq!(
            run["mode"] == "exact",
            run["ratio_to_bare"].as_f64().is_some_and(|r| r > 0.0),
            "{run}"
        );
    }
    // The sketch's 1 % accuracy holds against exact nearest-rank quantiles.
    assert_eq!(r["quantile_errors"].as_array().unwrap().len(), 3, "{r}");
    assert!(
        r["max_relative_error"].as_f64().unwrap() <= 0.01 * (1.0 + 1e-9),
        "{r}"
    );
    let busy = &r["busy"];
    assert_eq!(busy["slices"], 7 * 120, "{busy}");
    assert!(busy["bytes"].as_i64().unwrap() > 0, "{busy}");
    // 7 precisions one at a time, then all at once.
    let reads = busy["reads"].as_array().unwrap();
    assert_eq!(reads.len(), 8, "{busy}");
    assert_eq!(reads[0]["slices"], 120, "{busy}");
    assert!(positive(&reads[7]["p99_us"]), "{busy}");
    // Each accuracy keeps its own promise, and a finer one costs more memory.
    let by = r["by_accuracy"].as_array().unwrap();
    assert_eq!(by.len(), 2, "{r}");
    for a in by {
        let accuracy = a["accuracy"].as_f64().unwrap();
        assert!(
            a["max_relative_error"].as_f64().unwrap() <= accuracy * (1.0 + 1e-9),
            "{a}"
        );
    }
    assert!(
        by[0]["bytes"].as_i64().unwrap() > by[1]["bytes"].as_i64().unwrap(),
        "{r}"
    );
}

#[test]
fn clean_removes_exactly_the_old_samples() {
    let r = bench("clean --counters 300 --book-counters 30 --recent 120");
    assert_eq!(r["scanned"], 300);
    assert_eq!(r["samples_removed"], 300 * 7 * 2);
    assert_eq!(r["book_counters"], 30);
    // A minute later the passes remove what a minute ages out at 1 s, 5 s
    // and 60 s (60 + 12 + 1 per counter), by name or by reading.
    assert_eq!(r["steady"]["samples_removed"], 300 * 73, "{r}");
    assert_eq!(r["steady_reading"]["samples_removed"], 300 * 73, "{r}");
}

#[test]
fn retention_checks_every_layout_and_the_peak_pass() {
    let r = bench("retention --counters 40 --peak-counters 20 --repeats 2 --batch 7");
    assert_eq!(r["bench"], "retention");
    assert_eq!(r["counters"], 40);
    assert_eq!(r["batch"], 7);
    let layouts = r["layouts"].as_array().unwrap();
    assert_eq!(layouts.len(), 3, "{r}");
    for (l, name) in layouts.iter().zip(["default", "ria"]) {
        assert_eq!(l["layout"], name, "{l}");
        let p = &l["regular_pass"];
        // A minute ages out 60 + 12 + 1 slices per counter at 1 s, 5 s and
        // 60 s; the pass removed exactly those, and 7 hashes of each
        // sampled counter hold exactly what they should.
        assert_eq!(p["due_precisions"], serde_json::json!([1, 5, 60]), "{p}");
        assert_eq!(p["removed_per_counter"], 73, "{p}");
        assert_eq!(p["pass"]["samples_removed"], 40 * 73, "{p}");
        assert_eq!(p["first_pass"]["samples_removed"], 0, "{p}");
        assert_eq!(p["increments"], 40 * 60, "{p}");
        assert_eq!(p["hashes_checked"], 40 * 7, "{p}");
        assert!(positive(&l["us_per_busy_counter_per_minute"]));
        assert_eq!(l["target"]["limit"], 15.0, "{l}");
        assert_eq!(l["target"]["scaled"], true, "{l}");
    }
    let e = &layouts[2];
    assert_eq!(e["layout"], "expiring", "{e}");
    let x = &e["expiring"];
    assert_eq!(
        x["new_chunk_rounds_cpu_seconds"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        x["existing_chunk_rounds_cpu_seconds"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Exactly the 40 chunk keys set to expire did, and are gone.
    assert_eq!(x["expire"]["keys"], 40, "{x}");
    assert_eq!(x["expire"]["expired_keys"], 40, "{x}");
    assert_eq!(x["expire"]["keys_checked_gone"], 40, "{x}");
    assert_eq!(x["reads_checked"], 40, "{x}");
    assert_eq!(x["chunks_per_minute"].as_array().unwrap().len(), 7, "{x}");
    assert_eq!(x["chunks_per_minute"][0]["per_minute"], 0.5, "{x}");
    assert!(
        e["us_per_busy_counter_per_minute"].as_f64().is_some(),
        "{e}"
    );
    assert_eq!(e["target"]["limit"], 5.0, "{e}");
    // The peak pass: every counter scanned (the book's registry has one
    // entry per precision), 120 + 61 slices per hash.
    let peak = r["peak"].as_array().unwrap();
    assert_eq!(peak.len(), 2, "{r}");
    for (p, scanned) in peak.iter().zip([20, 20 * 7]) {
        assert_eq!(p["counters"], 20, "{p}");
        assert_eq!(p["reduced_for_memory"], false, "{p}");
        assert_eq!(
            (p["recent"].clone(), p["old"].clone()),
            (120.into(), 61.into())
        );
        assert_eq!(p["scanned"], scanned, "{p}");
        assert_eq!(p["pass"]["samples_removed"], 20 * 7 * 61, "{p}");
        assert_eq!(p["target"]["limit"], 60.0, "{p}");
    }
}

#[test]
fn migrate_copies_every_sample_and_reports_its_rate() {
    let r = bench("migrate --counters 500 --samples 3");
    assert_eq!(r["bench"], "migrate");
    assert_eq!(r["samples"], 500 * 7 * 3, "{r}");
    assert_eq!(r["batches"], 5, "{r}");
    assert_eq!(r["exact"], true, "{r}");
    assert!(positive(&r["ratio_to_direct"]), "{r}");
}

#[test]
fn the_older_benches_still_run() {
    let r = bench("plan --increments 1000");
    assert_eq!(r["increments"], 1000);
    let r = bench("daily-memory --entities 50 --days 2");
    assert_eq!(r["views_written"], 100);
    let r = bench("cluster --seconds 0.2 --writers 2");
    assert!(positive(&r["counters_ratio_3_to_1"]), "{r}");
    let dir = tempfile::tempdir().unwrap();
    let sink = format!("sqlite:{}", dir.path().join("sink.sqlite3").display());
    let data = dir.path().join("data");
    let mut cmd = tally();
    cmd.arg("--data-dir").arg(&data).args([
        "bench",
        "buffer",
        "--sink",
        &sink,
        "--increments",
        "200",
        "--rows",
        "5",
        "--writers",
        "2",
        "--json",
    ]);
    let out = ok(&mut cmd);
    assert!(out.contains("\"totals_exact\":true"), "{out}");
}

#[test]
fn http_drives_tally_serve_with_wrk_and_checks_totals() {
    let r = bench("http --seconds 1 --counters 10 --batch 10 --connections 4");
    let runs = r["runs"].as_array().unwrap();
    // 2 backends x (single, batch), each checked exact against what the server accepted.
    assert_eq!(runs.len(), 4, "{r}");
    for run in runs {
        assert_eq!(run["totals_exact"], true, "{run}");
        assert!(run["server_accepted"].as_u64().unwrap() > 0, "{run}");
        assert!(positive(&run["ratio_to_healthz"]), "{run}");
    }
}

#[test]
fn statsd_counts_what_the_server_accepted() {
    let r = bench("statsd --seconds 0.5 --counters 10 --lines 5");
    assert!(positive(&r["bare_socket_datagrams_per_second"]), "{r}");
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{r}");
    for run in runs {
        assert_eq!(run["totals_exact"], true, "{run}");
        assert!(run["lines_accepted"].as_u64().unwrap() > 0, "{run}");
    }
}

#[test]
fn carbon_reads_back_every_gauge_on_both_backends() {
    let r = bench("carbon --lines 20000 --names 100 --repeat 2");
    assert_eq!(r["bench"], "carbon");
    assert_eq!(r["lines"], 20_000, "{r}");
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{r}");
    for (run, backend) in runs.iter().zip(["redis", "sqlite"]) {
        assert_eq!(run["backend"], backend, "{run}");
        assert_eq!(run["gauges_exact"], true, "{run}");
        assert_eq!(run["carbon_runs_seconds"].as_array().unwrap().len(), 2);
        for rate in [
            "carbon_lines_per_second",
            "writer_lines_per_second",
            "ratio_to_writer",
        ] {
            assert!(positive(&run[rate]), "{rate}: {run}");
        }
    }
}

/// The burst, small: loss per receiver, tally next to a bare socket
/// with its buffer and the reference statsd daemon (npm `statsd`, which the
/// bench installs: this fails, saying so, when the npm registry is out of
/// reach). Every loss must match the kernel's drop counter of its socket.
#[test]
fn statsd_burst_reports_loss_next_to_the_reference_daemon() {
    let r = bench("statsd --backend sqlite --seconds 0.3 --counters 10 --lines 5 --burst 5000");
    let burst = &r["burst"];
    assert_eq!(burst["datagrams"], 5000, "{burst}");
    assert_eq!(burst["recv_buffer_requested"], 8 << 20, "{burst}");
    assert!(
        burst["statsd"]
            .as_str()
            .unwrap()
            .starts_with("statsd 0.9.0"),
        "{burst}"
    );
    let runs = burst["runs"].as_array().unwrap();
    let receivers: Vec<&str> = runs
        .iter()
        .map(|run| run["receiver"].as_str().unwrap())
        .collect();
    assert_eq!(
        receivers,
        ["bare socket", "tally sqlite", "statsd"],
        "{burst}"
    );
    for run in runs {
        let sent = run["datagrams_sent"].as_u64().unwrap();
        let received = run["datagrams_received"].as_u64().unwrap();
        let lost = run["lost"].as_u64().unwrap();
        assert_eq!(sent, 5000, "{run}");
        assert!(received > 0, "{run}");
        assert_eq!(received + lost, sent, "{run}");
        assert_eq!(run["kernel_drops"].as_u64(), Some(lost), "{run}");
        let percent = run["loss_percent"].as_f64().unwrap();
        assert!(
            (percent - 100.0 * lost as f64 / sent as f64).abs() < 1e-9,
            "{run}"
        );
        assert!(run["recv_buffer_bytes"].as_u64().unwrap() > 0, "{run}");
    }
    assert_eq!(runs[1]["totals_exact"], true, "{burst}");
    assert!(positive(&runs[1]["received_ratio_to_bare_socket"]));
    assert!(positive(&runs[1]["received_ratio_to_statsd"]));
}

/// The Graphite bench at tiny sizes on both backends: every case's answers
/// agreed with graphite-web's before timing (the bench fails otherwise),
/// and every figure the report states is there.
#[test]
fn graphite_renders_and_finds_next_to_graphite_web() {
    let venv = tally_testkit::graphite_venv();
    let command = "graphite --seconds 0.3 --connections 2 --series 5 --many 20 --iterations 5 \
                   --find-hosts 20 --find-metrics 5 --workers 1";
    let venv = ["--graphite-venv", venv.to_str().unwrap()];
    let r = bench_args(command.split_whitespace().chain(venv));
    assert_eq!(r["bench"], "graphite", "{r}");
    let renders = r["renders"].as_array().unwrap();
    assert_eq!(renders.len(), 4, "{r}");
    for case in renders {
        assert!(case.get("failed").is_none(), "{case}");
        assert!(case["points"].as_u64().unwrap() > 0, "{case}");
        let web = &case["graphite_web"];
        assert!(positive(&web["requests_per_second"]), "{case}");
        let tally = case["tally"].as_array().unwrap();
        assert_eq!(tally.len(), 2, "{case}");
        for run in tally {
            assert!(positive(&run["requests_per_second"]), "{run}");
            assert!(positive(&run["rps_ratio"]), "{run}");
        }
    }
    assert_eq!(r["library"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(r["find_names"], 100, "{r}");
    let finds = r["finds"].as_array().unwrap();
    // app.* and app.host<n>.* on both backends.
    assert_eq!(finds.len(), 4, "{r}");
    for find in finds {
        assert!(find["nodes"].as_u64().unwrap() > 0, "{find}");
        if find["backend"] == "redis" {
            assert!(find["bare"]["names"].as_u64().unwrap() > 0, "{find}");
        }
    }
}

#[test]
fn retention_measures_the_compact_layouts_passes() {
    let r = bench("retention --layouts compact --counters 40 --peak-counters 20 --batch 7");
    let layouts = r["layouts"].as_array().unwrap();
    assert_eq!(layouts.len(), 1, "{r}");
    let l = &layouts[0];
    assert_eq!(l["layout"], "compact", "{l}");
    // The regular pass removed exactly the minute's slices at 1, 5 and
    // 60 s from each counter's one hash, checked for every sampled one.
    let p = &l["regular_pass"];
    assert_eq!(p["removed_per_counter"], 73, "{p}");
    assert_eq!(p["pass"]["samples_removed"], 40 * 73, "{p}");
    assert_eq!(p["hashes_checked"], 40 * 7, "{p}");
    // The peak: one hash per counter, a listpack of every precision's
    // 181 slices (the run raised the server's limit to that).
    let peak = r["peak"].as_array().unwrap();
    assert_eq!(peak.len(), 1, "{r}");
    let k = &peak[0];
    assert_eq!(k["layout"], "compact", "{k}");
    assert_eq!(k["fill"], "restore", "{k}");
    assert_eq!(k["listpack_entries_set"], 7 * 181, "{k}");
    assert_eq!(k["scanned"], 20, "{k}");
    assert_eq!(k["pass"]["samples_removed"], 20 * 7 * 61, "{k}");
    assert_eq!(k["cpu_target"]["limit"], 60.0, "{k}");
    // The pass read every hash whole (DUMP) and removed the old fields.
    let commands = &k["commands_us_per_counter"];
    assert!(commands["dump"].as_f64().is_some(), "{k}");
    assert!(commands.get("config|resetstat").is_none(), "{k}");
}

#[test]
fn retention_fills_the_peak_by_restoring_one_counter() {
    let r = bench("retention --layouts default,ria --counters 20 --peak-counters 30");
    let peak = r["peak"].as_array().unwrap();
    assert_eq!(peak.len(), 2, "{r}");
    for (k, scanned) in peak.iter().zip([30, 30 * 7]) {
        assert_eq!(k["fill"], "restore", "{k}");
        assert!(k["listpack_entries_set"].is_null(), "{k}");
        // Every copied counter was scanned and lost exactly its old slices.
        assert_eq!(k["scanned"], scanned, "{k}");
        assert_eq!(k["pass"]["samples_removed"], 30 * 7 * 61, "{k}");
        assert!(positive(&k["cpu_target"]["measured"]), "{k}");
        assert!(positive(&k["used_memory_gib"]), "{k}");
    }
}

#[test]
fn read_times_a_busy_stat_next_to_a_bare_client() {
    let r = bench("read --backend redis --iterations 50");
    let b = &r["busy_stat"];
    assert_eq!(b["layout"], "default", "{b}");
    assert!(positive(&b["kib"]), "{b}");
    // One HGETALL per precision and the HMGET of the pending slice.
    let bare = b["bare_commands"].as_array().unwrap();
    assert_eq!(bare.len(), 8, "{b}");
    assert!(bare[7].as_str().unwrap().starts_with("HMGET "), "{b}");
    let reads = b["reads"].as_array().unwrap();
    // Every precision at once, then each alone.
    assert_eq!(reads.len(), 8, "{b}");
    assert_eq!(reads[0]["read"], "every precision", "{b}");
    assert_eq!(reads[0]["slices"], 7 * 120, "{b}");
    for x in &reads[1..] {
        assert_eq!(x["read"], "one precision", "{x}");
        assert_eq!(x["slices"], 120, "{x}");
    }
    for x in reads {
        assert_eq!(x["iterations"], 5, "{x}");
        assert!(positive(&x["bare_p50_us"]), "{x}");
        assert!(positive(&x["p50_ratio_to_bare"]), "{x}");
        assert!(positive(&x["redis_us_per_read"]), "{x}");
    }
}

//! A durable server restarted after a crash that tore its last AOF write
//! inside a transaction keeps no part of that transaction, even across a
//! second restart (see `tally_testkit::redis::repair_aof`).

use std::io::Write;

use tally_testkit::{RedisOptions, RedisServer};

fn durable() -> RedisServer {
    RedisServer::start_with(RedisOptions {
        durable: true,
        ..RedisOptions::default()
    })
}

/// The incr file of the server's multi-part AOF (the manifest names it).
fn incr_file(server: &RedisServer) -> std::path::PathBuf {
    let dir = server.dir().join("appendonlydir");
    let manifest = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
    let name = manifest
        .lines()
        .find(|l| l.contains("type i"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no incr file in the manifest:\n{manifest}"));
    dir.join(name)
}

#[test]
fn a_torn_transaction_is_dropped_whole_across_restarts() {
    let mut server = durable();
    assert_eq!(server.command("SET kept 1").unwrap(), "+OK\r\n");

    // A crash in the middle of writing a script's effects: MULTI and one
    // whole command reached the file, the next command only in part.
    server.kill();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(incr_file(&server))
        .unwrap();
    file.write_all(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$4\r\ntorn\r\n*2\r\n$4\r\nIN")
        .unwrap();
    drop(file);

    server.start_again();
    assert_eq!(server.command("GET kept").unwrap(), "$1\r\n1\r\n");
    assert_eq!(server.command("GET torn").unwrap(), "$-1\r\n");
    // A later transaction, then another crash and start: the torn one must
    // not come back inside it.
    let reply = server
        .command("EVAL \"redis.call('INCR', 'later') return redis.call('INCR', 'later')\" 0")
        .unwrap();
    assert_eq!(reply, ":2\r\n");
    server.restart();
    assert_eq!(server.command("GET torn").unwrap(), "$-1\r\n");
    assert_eq!(server.command("GET later").unwrap(), "$1\r\n2\r\n");
    assert_eq!(server.command("GET kept").unwrap(), "$1\r\n1\r\n");
}

//! The cluster harness against real processes: it comes up healthy, slots
//! match the servers' own CLUSTER KEYSLOT, and a slot migration and a
//! failover leave it healthy with the data where it should be.

use tally_testkit::resp::Reply;
use tally_testkit::{ClusterOptions, RedisCluster, key_slot};

#[test]
fn three_masters_with_replicas_come_up_healthy() {
    let mut cluster = RedisCluster::start();
    assert_eq!(cluster.nodes().len(), 6);
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    for &m in &masters {
        assert!(cluster.replica_of(m).is_some(), "master {m} has no replica");
    }
    for key in ["foo", "{advert:314}:views", "tally:1", "x"] {
        let slot = cluster.admin(masters[0], &["CLUSTER", "KEYSLOT", key]);
        assert_eq!(
            slot,
            Reply::Int(i64::from(key_slot(key.as_bytes()))),
            "{key}"
        );
    }
    // A key written before a migration is on the new master afterwards.
    let slot = key_slot(b"moving");
    let from = cluster.master_of_slot(slot);
    cluster.admin(from, &["SET", "moving", "1"]);
    let to = *masters.iter().find(|&&m| m != from).unwrap();
    cluster.migrate_slot(slot, to);
    assert_eq!(cluster.master_of_slot(slot), to);
    assert_eq!(
        cluster.admin(to, &["GET", "moving"]).text().as_deref(),
        Some("1")
    );
    // Killing that master promotes its replica, which has the key once it
    // has replicated everything the master had when the migration ended
    // (its `slave_repl_offset` reaches the master's `master_repl_offset`;
    // WAIT on a new connection proves nothing, having written nothing), and
    // once the promoted node serves the slot (right after a failover it may
    // still answer MOVED while it learns the migrated slot is its own).
    let replica = cluster.replica_of(to).expect("a replica");
    let target = repl_offset(&cluster, to, "master_repl_offset");
    assert!(target > 0, "master {to} reports no master_repl_offset");
    assert!(
        tally_testkit::wait_until(tally_testkit::PATIENCE, || {
            repl_offset(&cluster, replica, "slave_repl_offset") >= target
        }),
        "replica {replica} never replicated master {to} up to offset {target}"
    );
    let new = cluster.kill_master_and_wait_failover(to);
    assert_eq!(cluster.master_of_slot(slot), new);
    let mut last = None;
    let served = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        let reply = cluster.admin(new, &["GET", "moving"]);
        let found = reply.text().as_deref() == Some("1");
        last = Some(reply);
        found
    });
    assert!(
        served,
        "the promoted master {new} answers {last:?} for the key"
    );
}

/// A replication offset (`master_repl_offset` or `slave_repl_offset`) from
/// node `i`'s `INFO replication`; -1 when it does not say.
fn repl_offset(cluster: &RedisCluster, i: usize, field: &str) -> i64 {
    let info = cluster.admin(i, &["INFO", "replication"]).text();
    info.as_deref()
        .unwrap_or("")
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .strip_prefix(':')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(-1)
}

#[test]
fn a_single_master_cluster_serves_every_slot() {
    let cluster = RedisCluster::start_with(ClusterOptions {
        masters: 1,
        replicas_per_master: 0,
        ..ClusterOptions::default()
    });
    assert_eq!(cluster.masters(), vec![0]);
    assert_eq!(cluster.master_of_slot(0), 0);
    assert_eq!(cluster.master_of_slot(16383), 0);
}

//! Connections nothing else sends on, next to the shared multiplexed one:
//! a `WATCH` holds for the connection that sent it, until its `EXEC` or
//! `UNWATCH`, so it needs a connection of its own. These are plain
//! connections, not the reconnecting manager: one lost between `WATCH` and
//! `EXEC` fails the call instead of running the transaction unwatched on
//! a new connection.

use std::sync::{Mutex, PoisonError};

use redis::aio::MultiplexedConnection;

use super::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, Redis};
use crate::error::Result;

/// Spare connections kept for the next caller; more are closed.
const SPARE_MAX: usize = 32;

/// Where [`Redis::exclusive`] connections come from (a standalone
/// server's client), and those given back.
pub(super) struct Exclusive {
    client: redis::Client,
    spare: Mutex<Vec<MultiplexedConnection>>,
}

impl Exclusive {
    pub(super) fn new(client: redis::Client) -> Self {
        Exclusive {
            client,
            spare: Mutex::default(),
        }
    }
}

impl Redis {
    /// A connection nothing else sends on, for a `WATCH` and its
    /// `MULTI`/`EXEC`: a spare one, else a new one; `None` on a cluster.
    /// Give it back with [`Redis::give_back`] once it watches nothing, or
    /// drop it.
    pub(crate) async fn exclusive(&self) -> Result<Option<MultiplexedConnection>> {
        let Some(exclusive) = &self.exclusive else {
            return Ok(None);
        };
        let spare = exclusive
            .spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        if let Some(conn) = spare {
            return Ok(Some(conn));
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let conn = exclusive
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(Some(conn))
    }

    /// Whether [`Redis::exclusive`] gives connections (a standalone server).
    pub(crate) fn can_watch(&self) -> bool {
        self.exclusive.is_some()
    }

    /// Keeps a connection of [`Redis::exclusive`] for the next caller: one
    /// that watches no key (after its `EXEC` or `UNWATCH`).
    pub(crate) fn give_back(&self, conn: MultiplexedConnection) {
        if let Some(exclusive) = &self.exclusive {
            let mut spare = exclusive
                .spare
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if spare.len() < SPARE_MAX {
                spare.push(conn);
            }
        }
    }
}

//! Reads from the persistent store while memory holds no full data set: a warm start
//! (serve the last known flags at once, until the data source delivers) and daemon
//! mode (no data source: the store is the only source, for good).
//!
//! The client's reads are synchronous and never wait for I/O, so this task loads the
//! store (through the cache) into a snapshot and publishes it, then loads it again
//! every cache TTL (every second with the cache off; never again with an infinite
//! TTL), until the first full data set arrives in memory and the driver hands over
//! (PROTOCOL.md B §5.8–5.9).

use std::sync::Arc;
use std::time::Duration;

use flagsync_core::store::{Change, ChangeSet, Store};
use flagsync_core::{Command, Kind, Snapshot};

use super::{CacheTtl, CachingStore, ItemMap, StoreError};
use crate::driver::{Msg, StoreReport, TaskGuard};
use crate::publish::Published;
use crate::runtime::{Runtime, race};

/// How soon a failed load is tried again (the core polls availability meanwhile).
const RETRY: Duration = Duration::from_secs(1);

/// How often the store is read again while memory has no data.
pub(crate) fn refresh_interval(ttl: CacheTtl) -> Option<Duration> {
    match ttl {
        CacheTtl::Expires(d) => Some(d),
        CacheTtl::Disabled => Some(Duration::from_secs(1)),
        CacheTtl::Infinite => None,
    }
}

/// Load and publish until `stop` closes (the hand-over or the client's end) or reads
/// no longer come from the store. A failed load reads as "not initialized" and is
/// reported to the core as a store failure (PROTOCOL.md A.4.4): the data store status
/// shows it, and the core polls the store's availability.
pub(crate) async fn run(
    rt: Arc<dyn Runtime>,
    store: Arc<CachingStore>,
    published: Arc<Published>,
    stop: async_channel::Receiver<()>,
    inbox: async_channel::Sender<Msg<Command>>,
    _guard: Arc<TaskGuard>,
) {
    let refresh = refresh_interval(store.config().ttl);
    while published.reads_from_store() {
        let next = match load(&store).await {
            Ok((snapshot, inited)) => {
                published.publish_store_data(snapshot, inited);
                refresh
            }
            Err(error) => {
                tracing::debug!(%error, "reading the persistent store failed");
                let _ = inbox.send(Msg::Store(StoreReport::Failed)).await;
                Some(refresh.map_or(RETRY, |r| r.min(RETRY)))
            }
        };
        published.store_load_done();
        let stopped = match next {
            Some(every) => race(stop.recv(), rt.sleep_until(rt.now() + every))
                .await
                .is_ok(),
            None => {
                let _ = stop.recv().await;
                true
            }
        };
        if stopped {
            break;
        }
    }
    published.store_load_done();
    tracing::debug!("persistent store reader ended");
}

/// Every live item of the store as a snapshot, and whether the store is initialized.
async fn load(store: &CachingStore) -> Result<(Snapshot, bool), StoreError> {
    let inited = store.initialized().await?;
    let segments = store.all(Kind::Segment).await?;
    let flags = store.all(Kind::Flag).await?;
    Ok((snapshot_of(&segments, &flags), inited))
}

/// A snapshot holding exactly these items (the dependency index is not needed: change
/// events of store data are computed by comparing snapshots).
pub(crate) fn snapshot_of(segments: &ItemMap, flags: &ItemMap) -> Snapshot {
    let changes = [(Kind::Segment, segments), (Kind::Flag, flags)]
        .into_iter()
        .flat_map(|(kind, map)| {
            map.iter().map(move |(key, item)| Change {
                kind,
                key: key.clone(),
                item: item.clone(),
                depends_on: Vec::new(),
            })
        })
        .collect();
    let mut memory = Store::new();
    memory.apply(ChangeSet::fdv1_full(changes));
    memory.snapshot()
}

/// Keys of the flags that differ between `old` and `new` (added, removed, or at
/// another version), sorted.
pub(crate) fn changed_flags(old: &Snapshot, new: &Snapshot) -> Vec<String> {
    let mut changed: Vec<String> = new
        .iter(Kind::Flag)
        .filter(|(key, item)| {
            old.get(Kind::Flag, key)
                .is_none_or(|o| o.version != item.version)
        })
        .map(|(key, _)| key.to_owned())
        .chain(
            old.iter(Kind::Flag)
                .filter(|(key, _)| new.get(Kind::Flag, key).is_none())
                .map(|(key, _)| key.to_owned()),
        )
        .collect();
    changed.sort_unstable();
    changed
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use flagsync_core::store::Item;

    use super::*;

    fn item(key: &str, version: u64) -> Item {
        Item {
            version,
            deleted: false,
            raw: Bytes::from(format!(r#"{{"key":"{key}","version":{version}}}"#)),
        }
    }

    fn map(items: &[(&str, u64)]) -> ItemMap {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), item(k, *v)))
            .collect()
    }

    #[test]
    fn store_data_becomes_a_snapshot_and_diffs_name_changed_flags() {
        let a = snapshot_of(&map(&[("s", 1)]), &map(&[("f", 1), ("g", 1)]));
        assert_eq!(a.get(Kind::Segment, "s").unwrap().version, 1);
        assert_eq!(a.len(Kind::Flag), 2);
        let b = snapshot_of(&map(&[("s", 2)]), &map(&[("f", 1), ("g", 2), ("h", 1)]));
        assert_eq!(changed_flags(&a, &b), ["g", "h"]);
        let c = snapshot_of(&ItemMap::new(), &map(&[("g", 2)]));
        assert_eq!(changed_flags(&b, &c), ["f", "h"]);
        assert_eq!(changed_flags(&Snapshot::default(), &a), ["f", "g"]);
    }

    #[test]
    fn refresh_follows_the_cache_ttl() {
        assert_eq!(
            refresh_interval(CacheTtl::Expires(Duration::from_secs(15))),
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            refresh_interval(CacheTtl::Disabled),
            Some(Duration::from_secs(1))
        );
        assert_eq!(refresh_interval(CacheTtl::Infinite), None);
    }
}

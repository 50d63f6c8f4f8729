//! Which flags a first full data set changed, from what the persistent store's view
//! served before it.

use flagsync_core::{Kind, Snapshot};

use crate::persist::view::StoreView;

/// What the persistent store's view served, taken before this process wrote a full
/// data set over it.
#[derive(Debug)]
pub(super) struct ServedByStore {
    points: Snapshot,
    listing: Snapshot,
}

impl ServedByStore {
    pub(super) fn of(view: &StoreView) -> Self {
        Self {
            points: view.snapshot(),
            listing: view.listing(),
        }
    }
}

/// What readers were served from the persistent store before a first full data set:
/// the flags whose live version the data set changes, or `None` if a segment changed
/// too (then flags may have changed through it: every flag is reported).
pub(super) fn changed_since_store(served: &ServedByStore, now: &Snapshot) -> Option<Vec<String>> {
    let (points, listing) = (&served.points, &served.listing);
    let served = |kind: Kind, key: &str| {
        points
            .get(kind, key)
            .or_else(|| listing.get(kind, key))
            .map(|i| i.version)
    };
    let live = |snapshot: &Snapshot, kind: Kind| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = snapshot
            .iter(kind)
            .map(|(k, i)| (k.to_owned(), i.version))
            .collect();
        v.sort_unstable();
        v
    };
    if live(listing, Kind::Segment) != live(now, Kind::Segment) {
        return None;
    }
    let mut changed: Vec<String> = now
        .iter(Kind::Flag)
        .filter(|(k, i)| served(Kind::Flag, k) != Some(i.version))
        .map(|(k, _)| k.to_owned())
        .chain(
            listing
                .iter(Kind::Flag)
                .filter(|(k, _)| now.get(Kind::Flag, k).is_none())
                .map(|(k, _)| k.to_owned()),
        )
        .collect();
    changed.sort_unstable();
    changed.dedup();
    Some(changed)
}

//! In-process data sources ([`DataSource`]: [`TestData`](crate::test_data::TestData),
//! [`FileDataSource`](crate::file_source::FileDataSource)) and the task that runs one
//! beside the driver.
//!
//! Such a source enters the client as the data source of the core's data system in
//! [`Mode::External`](crate::Mode::External): its data goes through the driver's inbox
//! as `Input::SourceData(ChangeSet)` (a failure as `Input::SourceFailed`), like a
//! stream's bytes do as `Input::Data`. So the store, change events, readiness, status
//! and data availability are the core's, the same as with a real stream; only the
//! making of the change set (from builders, from files) is the source's. The source
//! runs as one task of the client's runtime (no socket, no thread), started by
//! [`Client::start`](crate::Client::start) and ended when the driver ends.

use std::fmt;
use std::sync::Arc;

use flagsync_core::store::ChangeSet;
use flagsync_core::{Command, ErrorKind, SourceFailure};

use crate::inbox::{Msg, SourceReport, TaskGuard};
use crate::runtime::{BoxFuture, Runtime, race};

/// A source of flag data inside the process, for
/// [`ClientBuilder::data_source`](crate::ClientBuilder::data_source): made from a
/// [`TestData`](crate::test_data::TestData) or a
/// [`FileDataSource`](crate::file_source::FileDataSource) with `into()`.
#[derive(Clone)]
pub struct DataSource(pub(crate) Arc<dyn ExternalSource>);

impl fmt::Debug for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What an in-process source does for one client.
pub(crate) trait ExternalSource: Send + Sync + fmt::Debug + 'static {
    /// Feed the client through `feed` until it refuses (the client ended) or the task
    /// is dropped. The first thing fed should be a full data set.
    fn run(&self, rt: Arc<dyn Runtime>, feed: Feed) -> BoxFuture<'static, ()>;
}

/// The way into one client's driver.
#[derive(Debug, Clone)]
pub(crate) struct Feed {
    tx: async_channel::Sender<Msg<Command>>,
}

impl Feed {
    /// Apply `changes`; false once the client has ended.
    pub(crate) async fn data(&self, changes: ChangeSet) -> bool {
        let msg = Msg::Source(SourceReport::Data(changes));
        self.tx.send(msg).await.is_ok()
    }

    /// Report a failure; false once the client has ended.
    pub(crate) async fn failed(&self, kind: ErrorKind, message: String) -> bool {
        let msg = Msg::Source(SourceReport::Failed(SourceFailure { kind, message }));
        self.tx.send(msg).await.is_ok()
    }
}

/// Run `source` for the client whose inbox `tx` is, until `stop` closes (the driver
/// ended). Holds `guard`, so [`Client::close`](crate::Client::close) waits for it.
pub(crate) fn spawn(
    source: &DataSource,
    rt: &Arc<dyn Runtime>,
    tx: async_channel::Sender<Msg<Command>>,
    stop: async_channel::Receiver<()>,
    guard: Arc<TaskGuard>,
) {
    let work = source.0.run(rt.clone(), Feed { tx });
    rt.spawn(Box::pin(async move {
        let _guard = guard;
        let _ = race(work, stop.recv()).await;
    }));
}

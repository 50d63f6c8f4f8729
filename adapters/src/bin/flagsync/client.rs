//! The CLI's view of a [`flagsync::Client`]: one stream of [`Update`]s.

use std::time::Duration;

use flagsync::{Client, DataSourceStatus, ErrorKind, FlagChange, Snapshot, State, Subscription};

/// How to connect.
#[derive(Debug, Clone)]
pub struct Options {
    pub sdk_key: String,
    pub stream_uri: String,
    pub polling_uri: String,
    pub polling: bool,
    pub filter: Option<String>,
}

/// A data-source error as the CLI shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorSummary {
    pub kind: ErrorKind,
    /// The HTTP status, or 0.
    pub status_code: u16,
    pub message: String,
}

impl ErrorSummary {
    /// The service could not be reached at all.
    pub fn unreachable(&self) -> bool {
        self.status_code == 0
            && (self.message.starts_with("connection failed")
                || self.message.starts_with("connect timed out"))
    }

    /// The service rejected the SDK key.
    pub fn key_rejected(&self) -> bool {
        matches!(self.status_code, 401 | 403)
    }
}

/// A data-source status as the CLI shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSummary {
    pub state: State,
    pub error: Option<ErrorSummary>,
}

/// Something the client reported.
#[derive(Debug, Clone)]
pub enum Update {
    Status(StatusSummary),
    /// This flag's data changed (directly or through a prerequisite or segment).
    FlagChanged(String),
    /// The first full data set arrived.
    Ready,
}

/// A running client.
pub struct Session {
    client: Client,
    statuses: Subscription<DataSourceStatus>,
    flags: Subscription<FlagChange>,
    waiting_ready: bool,
}

impl Session {
    /// Build and start a client; call inside the tokio runtime. Errors are
    /// configuration errors, as a message.
    pub fn start(opts: &Options) -> Result<Self, String> {
        let mut builder = Client::builder(opts.sdk_key.clone())
            .stream_uri(opts.stream_uri.clone())
            .polling_uri(opts.polling_uri.clone())
            .polling(opts.polling);
        if let Some(f) = &opts.filter {
            builder = builder.payload_filter(f.clone());
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        // Subscribe before starting, so nothing is missed.
        let statuses = client.status_changes();
        let flags = client.flag_changes();
        client.start().map_err(|e| e.to_string())?;
        Ok(Self {
            client,
            statuses,
            flags,
            waiting_ready: true,
        })
    }

    /// The next update, or `None` once the client stopped.
    pub async fn next(&mut self) -> Option<Update> {
        tokio::select! {
            biased;
            s = self.statuses.recv() => s.map(|s| Update::Status(summarize(&s))),
            // Flag changes before readiness: the initial data's changes come out first.
            f = self.flags.recv() => f.map(|f| Update::FlagChanged(f.key)),
            ready = self.client.wait_for_initialization(Duration::from_secs(365 * 86400)),
                if self.waiting_ready => {
                self.waiting_ready = false;
                if ready {
                    // Every change event of the initial data is buffered by now (the
                    // client publishes them before it reports initialized): they are
                    // part of what Ready reports, not news.
                    while self.flags.try_recv().is_some() {}
                    Some(Update::Ready)
                } else {
                    // The source gave up: the status update says why.
                    self.statuses.recv().await.map(|s| Update::Status(summarize(&s)))
                }
            }
        }
    }

    /// Bytes received so far on the data-source connections.
    pub fn bytes_received(&self) -> u64 {
        self.client.bytes_received()
    }

    /// The latest data.
    pub fn snapshot(&self) -> Snapshot {
        self.client.snapshot()
    }

    /// Stop the client and wait (briefly) for its sockets to close.
    pub async fn close(self) {
        self.client.close().await;
    }
}

fn summarize(status: &DataSourceStatus) -> StatusSummary {
    StatusSummary {
        state: status.state,
        error: status.error.as_ref().map(|e| ErrorSummary {
            kind: e.kind,
            status_code: e.status_code,
            message: e.message.clone(),
        }),
    }
}

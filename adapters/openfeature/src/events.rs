//! The provider's status and events, from the client's data-source status and flag
//! changes (as LaunchDarkly's Java and .NET providers derive them).

use flagsync::{Client, DataSourceStatus, FlagChange, State, Subscription};
use futures_lite::future;
use open_feature::provider::ProviderStatus;

/// The provider status for the client's state (see `FlagsyncProvider::status`).
pub(crate) fn status_of(client: &Client, init_failed: bool) -> ProviderStatus {
    match client.status().state {
        State::Valid => ProviderStatus::Ready,
        State::Interrupted => ProviderStatus::STALE,
        State::Off => ProviderStatus::Error,
        State::Initializing if client.initialized() => ProviderStatus::Ready,
        State::Initializing if init_failed => ProviderStatus::Error,
        State::Initializing => ProviderStatus::NotReady,
    }
}

/// A provider event (OpenFeature's provider event types).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderEvent {
    /// `PROVIDER_READY`: the client has (again) valid data.
    Ready,
    /// `PROVIDER_STALE`: the client lost its connection and serves the data it had.
    Stale {
        /// The last data-source error, if any.
        message: Option<String>,
    },
    /// `PROVIDER_ERROR`: the client stopped for good (closed, or a permanent error such
    /// as an invalid SDK key).
    Error {
        /// The last data-source error, if any.
        message: Option<String>,
    },
    /// `PROVIDER_CONFIGURATION_CHANGED`: flags changed (`flagsChanged`).
    ConfigurationChanged {
        /// The changed flags' keys.
        flags_changed: Vec<String>,
    },
}

impl ProviderEvent {
    /// The event for a data-source status; `None` for `INITIALIZING`, which makes no
    /// event.
    pub fn of_status(status: &DataSourceStatus) -> Option<Self> {
        let message = status.error.as_ref().map(|e| e.message.clone());
        match status.state {
            State::Valid => Some(Self::Ready),
            State::Interrupted => Some(Self::Stale { message }),
            State::Off => Some(Self::Error { message }),
            State::Initializing => None,
        }
    }
}

/// The stream of [`ProviderEvent`]s of one subscription
/// ([`crate::FlagsyncProvider::events`]). It ends when the client is closed.
#[derive(Debug)]
pub struct ProviderEvents {
    statuses: Subscription<DataSourceStatus>,
    flags: Subscription<FlagChange>,
}

impl ProviderEvents {
    pub(crate) fn new(client: &Client) -> Self {
        Self {
            statuses: client.status_changes(),
            flags: client.flag_changes(),
        }
    }

    /// The next event, or `None` once the client is closed.
    pub async fn recv(&self) -> Option<ProviderEvent> {
        loop {
            let next = future::or(async { self.statuses.recv().await.map(Ok) }, async {
                self.flags.recv().await.map(Err)
            })
            .await?;
            if let Some(event) = Self::event(next) {
                return Some(event);
            }
        }
    }

    /// The next event if one is waiting.
    pub fn try_recv(&self) -> Option<ProviderEvent> {
        loop {
            let next = match self.statuses.try_recv() {
                Some(status) => Ok(status),
                None => Err(self.flags.try_recv()?),
            };
            if let Some(event) = Self::event(next) {
                return Some(event);
            }
        }
    }

    fn event(next: Result<DataSourceStatus, FlagChange>) -> Option<ProviderEvent> {
        match next {
            Ok(status) => ProviderEvent::of_status(&status),
            Err(change) => Some(ProviderEvent::ConfigurationChanged {
                flags_changed: vec![change.key],
            }),
        }
    }
}

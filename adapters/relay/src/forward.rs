//! The relay's events forwarder: every analytics payload a downstream SDK posts goes
//! to its environment's events service unchanged (the same path, body and
//! LaunchDarkly headers, the environment's SDK key), as an SDK would send it: one
//! retry after a second on a network error or a recoverable status (400, 408, 429,
//! 5xx), and an environment whose key the service rejects (401, 403) sends no more.
//!
//! Client-side and mobile payloads go to the matching endpoints of the same events
//! service, as LaunchDarkly's Relay Proxy forwards them: a browser's to
//! `/events/bulk/{envId}` and `/events/diagnostic/{envId}` (the client-side ID it
//! posted to, no `Authorization`), a mobile SDK's to `/mobile/events/bulk` and
//! `/mobile/events/diagnostic` with the environment's mobile key (not forwarded when
//! the environment has none configured: the relay never keeps the key an SDK sent).
//!
//! Payloads wait in the server's event subscription, which holds at most
//! [`QUEUE`] of them: beyond that they are dropped and counted (reported at the end),
//! never buffered without bound: the [`ForwardReport`] of
//! [`RelayHandle::shutdown`](crate::RelayHandle::shutdown) counts them.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use flagsync_server::{
    EnvironmentHandle, EventOrigin, EventPayload, EventSubscription, PayloadKind, RelayEnvironment,
    ServerHandle,
};

#[cfg(not(any(feature = "ring", feature = "aws-lc-rs")))]
compile_error!(
    "flagsync-relay needs a crypto provider: enable its `ring` (default) or `aws-lc-rs` feature"
);

/// The forwarder's rustls crypto provider, the one the SDK, the Redis crate and the
/// server use too (the same features): aws-lc-rs with `aws-lc-rs` (also with `ring`),
/// else ring. Given to ureq explicitly, which would otherwise use rustls' process
/// default.
fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    #[cfg(feature = "aws-lc-rs")]
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
    let provider = rustls::crypto::ring::default_provider();
    Arc::new(provider)
}

/// The relay's HTTP agent (events forwarded, goals fetched).
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .unversioned_rustls_crypto_provider(crypto_provider())
                .build(),
        )
        .build()
        .into()
}

/// The most payloads waiting to be forwarded.
const QUEUE: usize = 10_000;

/// How long a post may take.
const TIMEOUT: Duration = Duration::from_secs(10);

struct Target {
    uri: String,
    sdk_key: String,
    mobile_key: Option<String>,
    rejected: bool,
    /// Where forwarded and failed payloads are counted (`GET /metrics`).
    env: Option<EnvironmentHandle>,
}

/// What the events forwarder lost, reported when the relay shuts down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForwardReport {
    /// Payloads the events service did not take (after the retry), or not sent because
    /// it had rejected the environment's SDK key.
    pub failed: u64,
    /// Payloads dropped because the queue of payloads waiting to be forwarded was full.
    pub dropped: u64,
}

/// The forwarding thread.
#[derive(Debug)]
pub(crate) struct Forwarder {
    thread: Option<JoinHandle<ForwardReport>>,
}

impl Forwarder {
    /// Forward what `server` receives for `environments` (those with an events URI).
    pub(crate) fn start(
        server: &ServerHandle,
        environments: &[RelayEnvironment],
    ) -> std::io::Result<Self> {
        let mut targets: HashMap<String, Target> = environments
            .iter()
            .filter_map(|e| {
                let uri = e.events_uri.as_ref()?.trim_end_matches('/').to_owned();
                Some((
                    e.name.clone(),
                    Target {
                        uri,
                        sdk_key: e.sdk_key.clone(),
                        mobile_key: e.mobile_key.clone(),
                        rejected: false,
                        env: server.environment(&e.name),
                    },
                ))
            })
            .collect();
        let events = server.subscribe_events(QUEUE);
        let thread = std::thread::Builder::new()
            .name("flagsync-relay-events".into())
            .spawn(move || run(&events, &mut targets))?;
        Ok(Self {
            thread: Some(thread),
        })
    }

    /// Wait for the thread (the server has shut down, which ends the subscription) and
    /// report what was lost (also in the log, when anything was).
    pub(crate) fn finish(&mut self) -> ForwardReport {
        let report = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        if report.failed + report.dropped > 0 {
            tracing::warn!(
                failed = report.failed,
                dropped = report.dropped,
                "{} event payloads could not be forwarded, {} were dropped (the queue was full)",
                report.failed,
                report.dropped
            );
        }
        report
    }
}

fn run(events: &EventSubscription, targets: &mut HashMap<String, Target>) -> ForwardReport {
    let agent = agent();
    let mut failed = 0;
    while let Some(payload) = events.recv() {
        let Some(target) = payload
            .environment
            .as_ref()
            .and_then(|name| targets.get_mut(name))
        else {
            continue;
        };
        let count = |target: &Target, forwarded, failed| {
            if let Some(env) = &target.env {
                env.count_forwarded_events(forwarded, failed);
            }
        };
        let server_side = payload.origin == EventOrigin::ServerSide;
        if target.rejected && server_side {
            count(target, 0, 1);
            continue;
        }
        let Some((url, auth)) = destination(target, &payload) else {
            tracing::debug!(
                environment = payload.environment.as_deref().unwrap_or_default(),
                "a mobile event payload was not forwarded: the environment has no mobile key configured"
            );
            count(target, 0, 1);
            failed += 1;
            continue;
        };
        let result = post(&agent, &url, auth, &payload);
        count(
            target,
            u64::from(result.is_ok()),
            u64::from(result.is_err()),
        );
        match result {
            Ok(()) => {}
            Err(Some(status)) if server_side && (status == 401 || status == 403) => {
                tracing::warn!(
                    environment = payload.environment.as_deref().unwrap_or_default(),
                    status,
                    "the events service rejected the SDK key (HTTP {status}); no more events are forwarded for this environment"
                );
                target.rejected = true;
                failed += 1;
            }
            Err(status) => {
                tracing::debug!(
                    environment = payload.environment.as_deref().unwrap_or_default(),
                    status = status.unwrap_or(0),
                    "an event payload could not be forwarded"
                );
                failed += 1;
            }
        }
    }
    ForwardReport {
        failed,
        dropped: events.dropped(),
    }
}

/// Where `payload` goes upstream and the `Authorization` it carries (see the module
/// docs); `None`: a mobile payload for an environment without a mobile key.
fn destination<'a>(
    target: &'a Target,
    payload: &EventPayload,
) -> Option<(String, Option<&'a str>)> {
    let diagnostic = payload.kind == PayloadKind::Diagnostic;
    Some(match &payload.origin {
        EventOrigin::ClientSide { env_id } => {
            let path = if diagnostic { "diagnostic" } else { "bulk" };
            (format!("{}/events/{path}/{env_id}", target.uri), None)
        }
        EventOrigin::Mobile => {
            let path = if diagnostic { "diagnostic" } else { "bulk" };
            let key = target.mobile_key.as_deref()?;
            (format!("{}/mobile/events/{path}", target.uri), Some(key))
        }
        _ => (
            format!("{}{}", target.uri, payload.kind.path()),
            Some(target.sdk_key.as_str()),
        ),
    })
}

/// Post `payload` to `url`, retrying once after a second when that may help.
/// `Err(status)`: the last status (`None` for a network error).
fn post(
    agent: &ureq::Agent,
    url: &str,
    auth: Option<&str>,
    payload: &EventPayload,
) -> Result<(), Option<u16>> {
    let mut last = None;
    for attempt in 0..2 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        let mut request = agent.post(url).header("Content-Type", "application/json");
        if let Some(auth) = auth {
            request = request.header("Authorization", auth);
        }
        for (name, value) in [
            ("User-Agent", &payload.user_agent),
            ("X-LaunchDarkly-Event-Schema", &payload.schema),
            ("X-LaunchDarkly-Payload-ID", &payload.payload_id),
            ("X-LaunchDarkly-Wrapper", &payload.wrapper),
            ("X-LaunchDarkly-Tags", &payload.tags),
            ("X-LaunchDarkly-Instance-Id", &payload.instance_id),
        ] {
            if let Some(v) = value {
                request = request.header(name, v);
            }
        }
        match request.send(&payload.raw[..]) {
            Ok(response) => {
                let status = response.status().as_u16();
                if (200..300).contains(&status) {
                    return Ok(());
                }
                last = Some(status);
                if !flagsync_core::events::status_is_recoverable(status) {
                    return Err(last);
                }
            }
            Err(_) => last = None,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    /// The forwarder's agent holds the provider the features choose, the same as the
    /// SDK's, the Redis crate's and the TLS listener's (the relay forwards its features
    /// to each), not rustls' process default: with both compiled in, ring is installed
    /// as the default first, and aws-lc-rs must still be the one used.
    #[test]
    fn every_part_uses_the_chosen_crypto_provider() {
        #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let expected = if cfg!(feature = "aws-lc-rs") {
            "AwsLcRs"
        } else {
            "Ring"
        };
        let agent = super::agent();
        let provider = agent
            .config()
            .tls_config()
            .unversioned_rustls_crypto_provider();
        let provider = provider.as_ref().expect("the agent's provider is set");
        assert_eq!(format!("{:?}", provider.key_provider), expected);
        let name = if cfg!(feature = "aws-lc-rs") {
            "aws-lc-rs"
        } else {
            "ring"
        };
        assert!(flagsync::crypto_provider_name().starts_with(name));
        assert_eq!(
            flagsync::crypto_provider_name(),
            flagsync_redis::crypto_provider_name()
        );
        assert_eq!(
            flagsync::crypto_provider_name(),
            flagsync_server::crypto_provider_name()
        );
    }
}

//! `registerFlagChangeListener`, `registerFlagValueChangeListener` and
//! `unregisterListener` (capabilities `flag-change-listeners` and
//! `flag-value-change-listeners`): each listener is a thread that reads one of the
//! client's change streams and POSTs every change to the harness's callback URI.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flagsync::Client;
use flagsync::eval::Context;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::service_http::post;

/// `registerFlagChangeListener`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlagChangeParams {
    /// The harness's name for the listener.
    pub listener_id: String,
    /// Where each notification is POSTed.
    pub callback_uri: String,
}

/// `registerFlagValueChangeListener`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueChangeParams {
    /// The harness's name for the listener.
    pub listener_id: String,
    /// The flag to watch.
    pub flag_key: String,
    /// The context it is evaluated for.
    pub context: Context,
    /// The value when the flag is missing.
    #[serde(default)]
    pub default_value: Value,
    /// Where each notification is POSTed.
    pub callback_uri: String,
}

/// `unregisterListener`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnregisterParams {
    /// The listener to remove.
    pub listener_id: String,
}

/// How long one callback POST may take.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(5);

/// The listeners of the service's clients, by client id and listener id. A listener's
/// flag stops it: it posts nothing more, and its thread ends at the next change or when
/// the client closes.
#[derive(Debug, Default)]
pub struct Listeners(Mutex<HashMap<(u64, String), Arc<AtomicBool>>>);

impl Listeners {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, String), Arc<AtomicBool>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new listener `id` of client `client`, replacing one of the same id; its stop
    /// flag.
    fn add(&self, client: u64, id: &str) -> Arc<AtomicBool> {
        let stop = Arc::new(AtomicBool::new(false));
        if let Some(old) = self.map().insert((client, id.to_owned()), stop.clone()) {
            old.store(true, Ordering::SeqCst);
        }
        stop
    }

    /// Register a listener of every flag change of `client`.
    pub fn flag_changes(&self, id: u64, client: &Client, p: FlagChangeParams) {
        let stop = self.add(id, &p.listener_id);
        let changes = client.flag_changes();
        std::thread::spawn(move || {
            while let Some(change) = futures_lite::future::block_on(changes.recv()) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                notify(
                    &p.callback_uri,
                    &json!({"listenerId": p.listener_id, "flagKey": change.key}),
                );
            }
        });
    }

    /// Register a listener of one flag's value for one context.
    pub fn value_changes(&self, id: u64, client: &Client, p: ValueChangeParams) {
        let stop = self.add(id, &p.listener_id);
        let mut changes = client.flag_value_changes(&p.flag_key, &p.context, p.default_value);
        std::thread::spawn(move || {
            while let Some(change) = futures_lite::future::block_on(changes.recv()) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                notify(
                    &p.callback_uri,
                    &json!({"listenerId": p.listener_id, "flagKey": change.key,
                        "oldValue": change.old_value, "newValue": change.new_value}),
                );
            }
        });
    }

    /// Stop listener `listener` of client `id`; false if there is none.
    pub fn remove(&self, id: u64, listener: &str) -> bool {
        match self.map().remove(&(id, listener.to_owned())) {
            Some(stop) => {
                stop.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Stop every listener of client `id` (it is being closed).
    pub fn remove_client(&self, id: u64) {
        self.map().retain(|(client, _), stop| {
            if *client == id {
                stop.store(true, Ordering::SeqCst);
            }
            *client != id
        });
    }
}

/// POST one notification; a failure is logged (the harness then reports the missing
/// callback).
fn notify(uri: &str, body: &Value) {
    let bytes = body.to_string().into_bytes();
    if let Err(e) = post(uri, "application/json", &bytes, CALLBACK_TIMEOUT) {
        eprintln!("sdk-contract-service: listener callback to {uri} failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_stops_a_listener_and_only_that_one() {
        let listeners = Listeners::default();
        let a = listeners.add(1, "a");
        let b = listeners.add(1, "b");
        let other = listeners.add(2, "a");
        assert!(listeners.remove(1, "a"));
        assert!(!listeners.remove(1, "a"), "already removed");
        assert!(a.load(Ordering::SeqCst));
        assert!(!b.load(Ordering::SeqCst) && !other.load(Ordering::SeqCst));
        listeners.remove_client(1);
        assert!(b.load(Ordering::SeqCst));
        assert!(!other.load(Ordering::SeqCst));
    }

    #[test]
    fn a_listener_registered_again_replaces_the_first() {
        let listeners = Listeners::default();
        let first = listeners.add(1, "x");
        let second = listeners.add(1, "x");
        assert!(first.load(Ordering::SeqCst));
        assert!(!second.load(Ordering::SeqCst));
    }
}

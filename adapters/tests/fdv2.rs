//! The FDv2 data system of the real client against the local flag server
//! (`flagsync::server`) over 127.0.0.1, on every runtime feature.
//!
//! Each test asserts on what can be observed from outside: the requests the server saw
//! (paths and `basis`), the store, the status, the data availability and the active
//! source. Timings are small so each test takes well under a few seconds.
#![cfg(feature = "server")]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
#[allow(unused_imports)] // the scripted server's re-exports are not used here
mod common;

use std::time::Duration;

use common::{Rt, SDK_KEY, builder, eventually, sleep, timeout};
use flagsync::server::{Endpoint, RecordedRequest, Server, ServerHandle};
use flagsync::{
    Client, CoordinatorTiming, DataAvailability, ErrorKind, Fdv2Config, Selector, SourceSpec, State,
};
use serde_json::json;

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    streaming_initializes_to_refreshed_and_applies_changes,
    polling_initializer_then_stream_with_basis,
    unauthorized_stream_is_removed_and_polling_takes_over,
    fallback_header_on_the_stream_moves_to_fdv1_polling_for_good,
    fallback_header_on_a_failed_initializer_poll_skips_fdv2,
    fallback_header_on_a_refused_stream_moves_to_fdv1_polling,
    goodbye_then_reconnect_with_basis,
    selector_is_the_payload_the_client_holds,
    error_event_mid_payload_keeps_the_stream,
    hung_stream_falls_back_to_polling_then_recovers,
);

fn start_server() -> ServerHandle {
    Server::builder()
        .sdk_key(Some(SDK_KEY.into()))
        .env_id(Some("env-fdv2".into()))
        .heartbeat(Duration::from_millis(200))
        .data(json!({
            "flags": {
                "f1": {"on": true, "variations": [true, false], "version": 3},
                "f2": {"on": false, "variations": [true, false]}
            },
            "segments": {"s1": {"included": ["u1"]}}
        }))
        .start()
        .unwrap()
}

/// Fast condition checks; fallback and recovery in well under a second.
fn timing() -> CoordinatorTiming {
    CoordinatorTiming {
        check_interval: Duration::from_millis(50),
        initializing_fallback: Duration::from_millis(300),
        interrupted_fallback: Duration::from_millis(300),
        recovery: Duration::from_secs(60),
    }
}

fn fast_polling() -> SourceSpec {
    SourceSpec::Polling {
        base_uri: None,
        interval: Some(Duration::from_millis(100)),
    }
}

fn fast_fdv1_polling() -> SourceSpec {
    SourceSpec::Fdv1Polling {
        base_uri: None,
        interval: Some(Duration::from_millis(100)),
    }
}

/// The default preset with fast polling and timing.
fn default_fast() -> Fdv2Config {
    let mut c = Fdv2Config::default()
        .synchronizers([SourceSpec::streaming(), fast_polling()])
        .fdv1_fallback(Some(fast_fdv1_polling()));
    c.timing = timing();
    c
}

/// The streaming preset with a fast FDv1 fallback and timing.
fn streaming_fast() -> Fdv2Config {
    let mut c = Fdv2Config::streaming().fdv1_fallback(Some(fast_fdv1_polling()));
    c.timing = timing();
    c
}

/// A client of `fdv2`, its poll intervals free of the 30 s minimum (these tests poll
/// every 100 ms).
fn client(rt: &Rt, server: &ServerHandle, fdv2: Fdv2Config) -> Client {
    builder(rt, &server.url())
        .fdv2(fdv2)
        .core_config(|c| c.min_poll_interval = Duration::from_millis(50))
        .build()
        .unwrap()
}

fn of(server: &ServerHandle, endpoint: Endpoint) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.endpoint() == Some(endpoint))
        .collect()
}

fn endpoints(server: &ServerHandle) -> Vec<Endpoint> {
    server
        .requests()
        .iter()
        .map(|r| r.endpoint().expect("a known endpoint"))
        .collect()
}

async fn streaming_initializes_to_refreshed_and_applies_changes(rt: Rt) {
    let server = start_server();
    let client = client(&rt, &server, streaming_fast());
    assert_eq!(client.data_availability(), DataAvailability::Defaults);
    assert_eq!(client.target_availability(), DataAvailability::Refreshed);
    assert_eq!(client.active_source(), None);
    let changes = client.flag_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    assert_eq!(client.active_source(), Some("streaming"));
    assert_eq!(client.status().state, State::Valid);
    assert_eq!(client.environment_id().as_deref(), Some("env-fdv2"));
    assert_eq!(client.flag("f1").unwrap().version, 3);
    assert!(client.segment("s1").is_some());
    assert_eq!(client.all_flags().len(), 2);

    let streams = of(&server, Endpoint::Fdv2Stream);
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].query("basis"), None);
    assert_eq!(streams[0].header("authorization"), Some(SDK_KEY));

    // Changes arrive as xfer-changes payloads.
    server.set_flag("f1", json!({"on": false})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_some_and(|f| !f.on)).await);
    assert_eq!(client.flag("f1").unwrap().version, 4);
    server.delete_flag("f2");
    assert!(eventually(&rt, 3 * SEC, || client.flag("f2").is_none()).await);
    let mut keys = Vec::new();
    while let Some(Some(c)) = timeout(&rt, SEC / 2, changes.recv()).await {
        keys.push(c.key);
    }
    assert!(
        keys.ends_with(&["f1".to_owned(), "f2".to_owned()]),
        "{keys:?}"
    );
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    // Nothing but the one stream.
    assert_eq!(endpoints(&server), [Endpoint::Fdv2Stream]);

    client.close().await;
    assert_eq!(client.status().state, State::Off);
    assert_eq!(client.active_source(), None);
}

async fn polling_initializer_then_stream_with_basis(rt: Rt) {
    let server = start_server();
    let client = client(&rt, &server, default_fast());
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(server.wait_for_streams(1, 5 * SEC));
    assert!(eventually(&rt, 3 * SEC, || client.active_source() == Some("streaming")).await);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].endpoint(), Some(Endpoint::Fdv2Poll));
    assert_eq!(reqs[0].query("basis"), None);
    assert_eq!(reqs[1].endpoint(), Some(Endpoint::Fdv2Stream));
    assert_eq!(reqs[1].query("basis"), Some(server.fdv2_state()));
    assert!(eventually(&rt, 3 * SEC, || client.status().state == State::Valid).await);
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    assert_eq!(client.flag("f2").unwrap().version, 1);

    // The stream, opened with an up-to-date basis, carries later changes.
    server.set_flag("f3", json!({"on": true})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f3").is_some()).await);
    assert_eq!(server.requests().len(), 2);
    client.close().await;
}

async fn unauthorized_stream_is_removed_and_polling_takes_over(rt: Rt) {
    let server = start_server();
    server.fail_endpoint(Endpoint::Fdv2Stream, Some(401));
    let client = client(&rt, &server, default_fast());
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(eventually(&rt, 3 * SEC, || client.active_source() == Some("polling")).await);
    // Polling keeps going; the stream is never asked for again.
    assert!(eventually(&rt, 3 * SEC, || of(&server, Endpoint::Fdv2Poll).len() >= 4).await);
    assert_eq!(of(&server, Endpoint::Fdv2Stream).len(), 1);
    let polls = of(&server, Endpoint::Fdv2Poll);
    assert_eq!(polls[0].query("basis"), None, "the initializer");
    assert_eq!(polls[1].query("basis"), Some(server.fdv2_state()));

    // The 401 was reported, but not as the end: before the first VALID from a
    // synchronizer, an interruption reads INITIALIZING (PROTOCOL.md B §3.2, §5.7).
    let mut seen = Vec::new();
    while let Some(s) = statuses.try_recv() {
        seen.push(s);
    }
    let refused = seen
        .iter()
        .find(|s| s.error.as_ref().is_some_and(|e| e.status_code == 401))
        .expect("a status with the 401");
    assert_eq!(refused.state, State::Initializing);
    assert_eq!(
        refused.error.as_ref().unwrap().kind,
        ErrorKind::ErrorResponse
    );
    assert!(eventually(&rt, 3 * SEC, || client.status().state == State::Valid).await);
    assert!(seen.iter().all(|s| s.state != State::Off));

    // Polling delivers changes.
    server.set_flag("f1", json!({"on": false})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_some_and(|f| !f.on)).await);
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    assert_eq!(of(&server, Endpoint::Fdv2Stream).len(), 1);
    client.close().await;
}

async fn fallback_header_on_the_stream_moves_to_fdv1_polling_for_good(rt: Rt) {
    let server = start_server();
    server.fdv1_fallback(true);
    let client = client(&rt, &server, streaming_fast());
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(
        eventually(&rt, 3 * SEC, || client.active_source()
            == Some("fdv1-polling"))
        .await
    );
    assert!(
        eventually(&rt, 3 * SEC, || client.data_availability()
            == DataAvailability::Cached)
        .await
    );
    // A few FDv1 polls, and no FDv2 request after the first one, even once the server
    // stops directing the fallback: the fallback is for good.
    server.fdv1_fallback(false);
    assert!(eventually(&rt, 3 * SEC, || of(&server, Endpoint::Fdv1Poll).len() >= 3).await);
    let seen = endpoints(&server);
    assert_eq!(seen[0], Endpoint::Fdv2Stream);
    assert!(
        seen[1..].iter().all(|e| *e == Endpoint::Fdv1Poll),
        "{seen:?}"
    );
    assert_eq!(client.status().state, State::Valid);
    assert_eq!(client.flag("f1").unwrap().version, 3);
    server.set_flag("f1", json!({"on": false})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_some_and(|f| !f.on)).await);
    assert_eq!(client.data_availability(), DataAvailability::Cached);
    assert_eq!(client.target_availability(), DataAvailability::Refreshed);
    assert_eq!(of(&server, Endpoint::Fdv2Stream).len(), 1);
    assert!(of(&server, Endpoint::Fdv2Poll).is_empty());
    client.close().await;
}

async fn fallback_header_on_a_failed_initializer_poll_skips_fdv2(rt: Rt) {
    let server = start_server();
    server.fdv1_fallback(true);
    server.fail_endpoint(Endpoint::Fdv2Poll, Some(500));
    let client = client(&rt, &server, default_fast());
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(
        eventually(&rt, 3 * SEC, || client.data_availability()
            == DataAvailability::Cached)
        .await
    );
    assert_eq!(client.active_source(), Some("fdv1-polling"));
    assert!(eventually(&rt, 3 * SEC, || of(&server, Endpoint::Fdv1Poll).len() >= 2).await);
    let seen = endpoints(&server);
    assert_eq!(seen[0], Endpoint::Fdv2Poll);
    assert!(
        seen[1..].iter().all(|e| *e == Endpoint::Fdv1Poll),
        "{seen:?}"
    );
    assert_eq!(client.status().state, State::Valid);
    assert_eq!(client.all_flags().len(), 2);
    client.close().await;
}

async fn fallback_header_on_a_refused_stream_moves_to_fdv1_polling(rt: Rt) {
    let server = start_server();
    server.fdv1_fallback(true);
    // Recoverable on its own: only the header ends FDv2 here.
    server.fail_endpoint(Endpoint::Fdv2Stream, Some(503));
    let client = client(&rt, &server, streaming_fast());
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.active_source(), Some("fdv1-polling"));
    assert_eq!(client.data_availability(), DataAvailability::Cached);
    assert!(eventually(&rt, 3 * SEC, || of(&server, Endpoint::Fdv1Poll).len() >= 2).await);
    assert_eq!(of(&server, Endpoint::Fdv2Stream).len(), 1);
    assert!(of(&server, Endpoint::Fdv2Poll).is_empty());
    assert_eq!(client.status().state, State::Valid);
    let error = client.status().error.expect("the 503 is kept");
    assert_eq!(
        (error.kind, error.status_code),
        (ErrorKind::ErrorResponse, 503)
    );
    client.close().await;
}

async fn goodbye_then_reconnect_with_basis(rt: Rt) {
    let server = start_server();
    server.goodbye_next(1);
    let client = client(&rt, &server, streaming_fast());
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    // The first stream ends with the goodbye; the second stays open.
    assert!(
        eventually(&rt, 3 * SEC, || of(&server, Endpoint::Fdv2Stream).len()
            == 2)
        .await
    );
    assert!(server.wait_for_streams(1, 3 * SEC));
    let streams = of(&server, Endpoint::Fdv2Stream);
    assert_eq!(streams[0].query("basis"), None);
    assert_eq!(streams[1].query("basis"), Some(server.fdv2_state()));
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    assert_eq!(client.all_flags().len(), 2);

    // The new stream (answered with intent `none`) carries changes.
    server.set_flag("f2", json!({"on": true})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f2").is_some_and(|f| f.on)).await);
    // A goodbye is not a failure: the status never left VALID.
    let mut seen = Vec::new();
    while let Some(s) = statuses.try_recv() {
        seen.push(s.state);
    }
    assert_eq!(seen, [State::Valid]);
    assert_eq!(of(&server, Endpoint::Fdv2Stream).len(), 2);
    client.close().await;
}

/// The selector the server sent with the payload the client holds.
fn served(server: &ServerHandle) -> Option<Selector> {
    Some(Selector {
        state: server.fdv2_state(),
        version: server.payload_version(),
    })
}

async fn selector_is_the_payload_the_client_holds(rt: Rt) {
    let server = start_server();
    let client = client(&rt, &server, streaming_fast());
    assert_eq!(client.fdv2_selector(), None);
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.fdv2_selector(), served(&server));
    assert_eq!(client.fdv2_selector().unwrap().version, 1);

    // Each change is a new payload, with a new selector.
    server.set_flag("f1", json!({"on": false})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_some_and(|f| !f.on)).await);
    assert_eq!(client.fdv2_selector(), served(&server));
    assert_eq!(client.fdv2_selector().unwrap().version, 2);
    // A reconnect sends the selector's state as the basis.
    server.drop_streams();
    assert!(
        eventually(&rt, 3 * SEC, || of(&server, Endpoint::Fdv2Stream).len()
            == 2)
        .await
    );
    let basis = of(&server, Endpoint::Fdv2Stream)[1].query("basis");
    assert_eq!(basis, client.fdv2_selector().map(|s| s.state));
    client.close().await;
    assert_eq!(client.fdv2_selector(), served(&server), "kept after close");

    // FDv1 data has no selector.
    let fdv1 = builder(&rt, &server.url()).build().unwrap();
    fdv1.start().unwrap();
    assert!(fdv1.wait_for_initialization(5 * SEC).await);
    assert_eq!(fdv1.fdv2_selector(), None);
    fdv1.close().await;
}

async fn error_event_mid_payload_keeps_the_stream(rt: Rt) {
    let server = start_server();
    server.payload_error_next(1);
    let client = client(&rt, &server, streaming_fast());
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.all_flags().len(), 2);
    assert!(client.segment("s1").is_some());
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    sleep(&rt, SEC / 5).await;
    assert_eq!(endpoints(&server), [Endpoint::Fdv2Stream]);
    let mut seen = Vec::new();
    while let Some(s) = statuses.try_recv() {
        seen.push(s.state);
    }
    assert_eq!(seen, [State::Valid]);
    client.close().await;
}

async fn hung_stream_falls_back_to_polling_then_recovers(rt: Rt) {
    let server = start_server();
    server.hang_endpoint(Endpoint::Fdv2Stream, true);
    let mut fdv2 = Fdv2Config::custom().synchronizers([SourceSpec::streaming(), fast_polling()]);
    fdv2.timing = CoordinatorTiming {
        recovery: Duration::from_millis(600),
        ..timing()
    };
    let client = client(&rt, &server, fdv2);
    client.start().unwrap();
    // Nothing from the stream: after the INITIALIZING fallback time, polling.
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.active_source(), Some("polling"));
    assert_eq!(of(&server, Endpoint::Fdv2Stream).len(), 1);
    assert_eq!(client.status().state, State::Valid);

    // The stream answers again; after VALID on polling for the recovery time, the
    // client returns to it, with its basis.
    server.hang_endpoint(Endpoint::Fdv2Stream, false);
    assert!(eventually(&rt, 5 * SEC, || client.active_source() == Some("streaming")).await);
    assert!(server.wait_for_streams(1, 3 * SEC));
    let streams = of(&server, Endpoint::Fdv2Stream);
    assert_eq!(streams.len(), 2);
    assert_eq!(streams[1].query("basis"), Some(server.fdv2_state()));
    let polls_then = of(&server, Endpoint::Fdv2Poll).len();
    sleep(&rt, SEC / 3).await;
    assert_eq!(
        of(&server, Endpoint::Fdv2Poll).len(),
        polls_then,
        "polling stopped"
    );
    server.set_flag("f1", json!({"on": false})).unwrap();
    assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_some_and(|f| !f.on)).await);
    client.close().await;
}

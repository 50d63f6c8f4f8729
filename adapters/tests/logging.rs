//! Every log line of a session, at TRACE, is free of the SDK key and the
//! `Authorization` header. Its own test binary: it installs a global subscriber.
#![cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]

#[macro_use]
mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::*;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        captured
    })
}

runtime_tests!(the_sdk_key_is_never_logged);

async fn the_sdk_key_is_never_logged(rt: Rt) {
    let logs = logs();
    let server = Server::start(|req, r| match req.index {
        0 => {
            r.send("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
            After::Close
        }
        1 => {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 1, true)], &[], Some("1")));
            After::Close
        }
        _ => {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 2, true)], &[], Some("2")));
            After::Hold
        }
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(Duration::from_secs(5)).await);
    assert!(eventually(&rt, Duration::from_secs(5), || server.connections() >= 3).await);
    client.close().await;
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("connected"),
        "the session was logged:\n{text}"
    );
    assert!(
        !text.contains(SDK_KEY),
        "the SDK key leaked into the logs:\n{text}"
    );
    assert!(!text.to_ascii_lowercase().contains("authorization:"));
}

/// The FDv2 data system through failures, a goodbye and the FDv1 fallback.
#[cfg(feature = "server")]
mod fdv2_session {
    use super::*;
    use flagsync::Fdv2Config;
    use flagsync::server::Server as FlagServer;

    pub(crate) async fn the_sdk_key_is_never_logged_under_fdv2(rt: Rt) {
        let logs = logs();
        let server = FlagServer::builder()
            .sdk_key(Some(SDK_KEY.into()))
            .data(serde_json::json!({"flagValues": {"f": true}}))
            .start()
            .unwrap();
        server.fail_next(1, 503); // the initializer
        server.goodbye_next(1); // the first stream
        let client = builder(&rt, &server.url())
            .fdv2(Fdv2Config::default())
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(client.wait_for_initialization(Duration::from_secs(5)).await);
        assert!(eventually(&rt, Duration::from_secs(5), || server.request_count() >= 3).await);
        server.fdv1_fallback(true);
        // A stream whose request was counted may not be open yet when streams are
        // dropped: drop them until the client has moved to FDv1.
        let fell_back = || {
            server.drop_streams();
            client.active_source() == Some("fdv1-polling")
        };
        assert!(eventually(&rt, Duration::from_secs(5), fell_back).await);
        client.close().await;
        let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("fdv2"), "the session was logged:\n{text}");
        assert!(
            !text.contains(SDK_KEY),
            "the SDK key leaked into the logs:\n{text}"
        );
        assert!(!text.to_ascii_lowercase().contains("authorization:"));
    }
}

#[cfg(feature = "server")]
mod fdv2_rt {
    use super::fdv2_session::*;
    runtime_tests!(the_sdk_key_is_never_logged_under_fdv2);
}

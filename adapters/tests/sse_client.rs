//! The SSE client against a scripted server, on every runtime feature.
#![cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]

#[macro_use]
mod common;

use std::time::Duration;

use common::*;
use flagsync::sse_client::{EventSource, Method, SseEvent};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    get_with_headers_events_and_last_event_id_on_reconnect,
    post_with_a_body_and_restart,
    no_content_stops_and_redirects_are_followed,
    read_timeout_reconnects,
);

async fn next(rt: &Rt, source: &mut EventSource) -> SseEvent {
    timeout(rt, 5 * SEC, source.next())
        .await
        .flatten()
        .expect("an event")
}

async fn next_event(rt: &Rt, source: &mut EventSource) -> (String, String, String) {
    loop {
        if let SseEvent::Event {
            event_type,
            data,
            id,
        } = next(rt, source).await
        {
            return (event_type, data, id);
        }
    }
}

fn sse_source(rt: &Rt, url: String) -> flagsync::sse_client::EventSourceBuilder {
    EventSource::builder(url)
        .runtime(rt.clone())
        .no_proxy()
        .initial_retry_delay(Duration::from_millis(10))
}

async fn get_with_headers_events_and_last_event_id_on_reconnect(rt: Rt) {
    let server = Server::start(|req, r| {
        r.send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
        if req.index == 0 {
            r.send(":hello\n\nid: a1\nevent: greet\ndata: one\ndata: two\n\n");
            After::Close
        } else {
            r.send("data: again\n\n");
            After::Hold
        }
    });
    let mut source = sse_source(&rt, format!("{}/stream?x=1", server.url()))
        .header("X-Custom", "yes")
        .last_event_id("start")
        .start()
        .unwrap();
    match next(&rt, &mut source).await {
        SseEvent::Open { status, .. } => assert_eq!(status, 200),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        next(&rt, &mut source).await,
        SseEvent::Comment("hello".into())
    );
    assert_eq!(
        next_event(&rt, &mut source).await,
        ("greet".into(), "one\ntwo".into(), "a1".into())
    );
    match next(&rt, &mut source).await {
        SseEvent::Error { retry_in, .. } => assert!(retry_in.is_some()),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        next_event(&rt, &mut source).await,
        ("message".into(), "again".into(), "a1".into())
    );
    let reqs = server.requests();
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].target.as_str()),
        ("GET", "/stream?x=1")
    );
    assert_eq!(reqs[0].header("x-custom"), Some("yes"));
    assert_eq!(reqs[0].header("accept"), Some("text/event-stream"));
    assert_eq!(reqs[0].header("last-event-id"), Some("start"));
    assert_eq!(reqs[1].header("last-event-id"), Some("a1"));
    source.close().await;
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
    assert_eq!(
        timeout(&rt, SEC, source.next()).await,
        Some(None),
        "the stream ends"
    );
}

async fn post_with_a_body_and_restart(rt: Rt) {
    let server = Server::start(|req, r| {
        r.send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
        r.send(format!("data: {}\n\n", String::from_utf8_lossy(&req.body)));
        After::Hold
    });
    let mut source = sse_source(&rt, server.url())
        .method(Method::Report)
        .header("Content-Type", "application/json")
        .body(r#"{"user":"u"}"#)
        .start()
        .unwrap();
    assert_eq!(next_event(&rt, &mut source).await.1, r#"{"user":"u"}"#);
    source.restart();
    assert_eq!(next_event(&rt, &mut source).await.1, r#"{"user":"u"}"#);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].method, "REPORT");
    // The restarted connection was closed.
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 1).await);
    let control = source.control();
    drop(source);
    control.close().await;
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
    let _ = Method::Post;
}

async fn no_content_stops_and_redirects_are_followed(rt: Rt) {
    // On the same origin (scheme, host and port) a redirect is followed, headers and all.
    let server = Server::start(move |req, r| {
        if req.target == "/final" {
            r.send("HTTP/1.1 204 No Content\r\n\r\n");
        } else {
            let port = req
                .header("host")
                .and_then(|h| h.rsplit(':').next())
                .unwrap_or_default()
                .to_owned();
            r.send(format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/final\r\nContent-Length: 0\r\n\r\n"
            ));
        }
        After::Close
    });
    let mut source = sse_source(&rt, server.url())
        .header("Authorization", "secret")
        .start()
        .unwrap();
    match next(&rt, &mut source).await {
        SseEvent::Error {
            status_code,
            retry_in,
            ..
        } => assert_eq!((status_code, retry_in), (204, None)),
        other => panic!("{other:?}"),
    }
    sleep(&rt, Duration::from_millis(100)).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].target, "/final");
    assert_eq!(requests[1].header("authorization"), Some("secret"));
    source.close().await;

    // To another port (another origin) it is refused: the headers never go there.
    let target = Server::start(|_, r| {
        r.send("HTTP/1.1 204 No Content\r\n\r\n");
        After::Close
    });
    let location = format!("{}/final", target.url());
    let server = Server::start(move |_, r| {
        r.send(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
        ));
        After::Close
    });
    let mut source = sse_source(&rt, server.url())
        .header("Authorization", "secret")
        .start()
        .unwrap();
    match next(&rt, &mut source).await {
        SseEvent::Error {
            status_code,
            retry_in,
            message,
            ..
        } => {
            assert_eq!(status_code, 307);
            assert!(retry_in.is_some(), "retried");
            assert!(message.contains("another origin"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    sleep(&rt, Duration::from_millis(100)).await;
    assert_eq!(target.connections(), 0);
    source.close().await;
}

async fn read_timeout_reconnects(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
        After::Hold
    });
    let mut source = sse_source(&rt, server.url())
        .read_timeout(Duration::from_millis(100))
        .start()
        .unwrap();
    assert!(matches!(
        next(&rt, &mut source).await,
        SseEvent::Open { .. }
    ));
    match next(&rt, &mut source).await {
        SseEvent::Error { message, .. } => assert_eq!(message, "read timed out"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        next(&rt, &mut source).await,
        SseEvent::Open { .. }
    ));
    assert!(server.connections() >= 2);
    source.close().await;
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
}

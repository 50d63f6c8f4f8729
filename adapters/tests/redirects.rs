//! Redirects over real sockets, on every runtime feature (issue 19, defect 1): the SDK
//! key goes to the configured origin only. An `https` → `http` redirect is refused
//! (the plain server never sees a byte), and so is one to another port; one on the
//! same origin is followed with the key.
#![cfg(all(
    feature = "tls",
    any(feature = "tokio", feature = "smol", feature = "async-std")
))]

#[macro_use]
mod common;

use std::time::Duration;

use common::*;
use flagsync::{ErrorKind, State};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    https_to_http_redirect_is_refused,
    redirect_to_another_port_is_refused_and_same_origin_is_followed,
);

/// A plain server that would take the key, and count the connections it got.
fn trap() -> Server {
    Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("stolen", 1, true)], &[], None));
        After::Hold
    })
}

async fn https_to_http_redirect_is_refused(rt: Rt) {
    let trap = trap();
    let certs = tls::certs(&["localhost"]);
    let location = format!("http://localhost:{}/all", trap.port);
    let server = Server::start_wrapped(tls::wrap(certs.server.clone()), move |_, r| {
        r.send(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
        ));
        After::Close
    });
    let client = builder(&rt, &format!("https://localhost:{}", server.port))
        .tls_built_in_roots(false)
        .add_root_certificate_pem(certs.ca_pem.clone())
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(
        eventually(&rt, 5 * SEC, || client.status().error.is_some()).await,
        "{:?}",
        client.status()
    );
    let error = client.status().error.unwrap();
    assert_eq!(
        (error.kind, error.status_code),
        (ErrorKind::ErrorResponse, 307)
    );
    assert!(error.message.contains("unencrypted"), "{}", error.message);
    sleep(&rt, Duration::from_millis(200)).await;
    assert_eq!(trap.connections(), 0, "nothing went to the http server");
    assert_eq!(client.status().state, State::Initializing);
    client.close().await;
}

async fn redirect_to_another_port_is_refused_and_same_origin_is_followed(rt: Rt) {
    let trap = trap();
    let location = format!("http://127.0.0.1:{}/all", trap.port);
    let server = Server::start(move |req, r| {
        if req.target == "/moved" {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 1, true)], &[], None));
            return After::Hold;
        }
        let to = if req.index == 0 {
            location.clone()
        } else {
            "/moved".to_owned()
        };
        r.send(format!(
            "HTTP/1.1 301 Moved Permanently\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"
        ));
        After::Close
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    client.start().unwrap();
    // Refused, retried with backoff, then a same-origin redirect is followed.
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(client.flag("f").is_some());
    assert_eq!(trap.connections(), 0, "nothing went to the other port");
    let error = client.status().error.unwrap();
    assert_eq!(error.status_code, 301);
    assert!(
        error.message.contains("another origin"),
        "{}",
        error.message
    );
    let requests = server.requests();
    assert_eq!(requests.last().unwrap().target, "/moved");
    assert_eq!(
        requests.last().unwrap().header("authorization"),
        Some(SDK_KEY)
    );
    client.close().await;
}

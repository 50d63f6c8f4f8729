//! Payload filters through the relay: each configured filter is kept in sync upstream
//! with `filter=KEY` and served to SDKs that ask for it; any other filter is refused.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{KEY, config, eventually, flag, relay, user};
use flagsync::{Client, Fdv2Config};
use flagsync_server::{Environment, Server, ServerHandle};
use serde_json::{Value, json};

/// An upstream serving [`KEY`] whole (flags `a` and `b`) and filtered by `mobile`
/// (flag `a` only), as LaunchDarkly's filtered environments are served.
fn upstream() -> ServerHandle {
    Server::builder()
        .environment(Environment::new("whole", KEY).data(json!({"flags": {
            "a": flag("a", json!("a-1"), 1), "b": flag("b", json!("b-1"), 1)}})))
        .environment(
            Environment::new("mobile", KEY)
                .payload_filter("mobile")
                .data(json!({"flags": {"a": flag("a", json!("a-1"), 1)}})),
        )
        .start()
        .expect("upstream")
}

async fn filtered_client(url: &str, filter: Option<&str>, fdv2: bool) -> Client {
    let rt = flagsync::runtime::TokioRuntime::try_current().expect("inside tokio");
    let mut b = Client::builder(KEY)
        .stream_uri(url)
        .polling_uri(url)
        .send_events(false)
        .runtime(Arc::new(rt))
        .no_proxy();
    if let Some(filter) = filter {
        b = b.payload_filter(filter);
    }
    if fdv2 {
        b = b.fdv2(Fdv2Config::default());
    }
    let c = b.build().expect("client");
    c.start().expect("started");
    assert!(
        c.wait_for_initialization(Duration::from_secs(10)).await,
        "never initialized (filter {filter:?}, fdv2 {fdv2})"
    );
    c
}

fn keys(c: &Client) -> Vec<String> {
    let state = c.all_flags_state(&user("u"), Default::default());
    let mut keys: Vec<String> = state.iter().map(|(k, _)| k.to_owned()).collect();
    keys.sort();
    keys
}

/// The status and body of `GET path` on the relay with [`KEY`].
fn get(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nAuthorization: {KEY}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let status = all[9..12].parse().unwrap();
    let body = all.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_configured_filter_is_relayed_and_others_are_refused() {
    for protocol in ["fdv2", "fdv1"] {
        let up = upstream();
        let relay = relay(config(json!({"upstream": up.url(), "protocol": protocol,
            "environments": {"prod": {"sdkKey": KEY, "payloadFilters": ["mobile"]}}})));
        let url = relay.server().url();
        for fdv2 in [false, true] {
            let whole = filtered_client(&url, None, fdv2).await;
            let mobile = filtered_client(&url, Some("mobile"), fdv2).await;
            assert_eq!(keys(&whole), ["a", "b"], "{protocol} fdv2 {fdv2}");
            assert_eq!(keys(&mobile), ["a"], "{protocol} fdv2 {fdv2}");
            // A change to the filtered environment upstream reaches its SDKs.
            let v = json!(format!("a-{protocol}-{fdv2}"));
            let version = 2 + u64::from(fdv2) + 2 * u64::from(protocol == "fdv1");
            up.environment("mobile")
                .unwrap()
                .set_flag("a", flag("a", v.clone(), version))
                .unwrap();
            eventually("the filtered change", Duration::from_secs(10), || {
                mobile.json_variation("a", &user("u"), Value::Null) == v
            })
            .await;
            whole.close().await;
            mobile.close().await;
        }
        let addr = relay.server().addr();
        let (status, body) = get(addr, "/sdk/latest-all?filter=tablet");
        assert_eq!(status, 404, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("\"tablet\""),
            "{body}"
        );
        let (status, body) = get(addr, "/sdk/latest-all?filter=mobile");
        assert_eq!(status, 200);
        assert_eq!(body["flags"].as_object().unwrap().len(), 1, "{body}");
        let status: Value = {
            let (_, s) = get(addr, "/status");
            s
        };
        assert!(
            status["environments"]["prod/mobile"].is_object(),
            "{status}"
        );
        tokio::task::spawn_blocking(move || relay.shutdown())
            .await
            .unwrap();
    }
}

#[test]
fn filters_are_checked_in_the_configuration() {
    for (filters, what) in [
        (json!(["no spaces"]), "not a filter key"),
        (json!(["-leading"]), "not a filter key"),
        (json!(["x", "x"]), "twice"),
    ] {
        let file = json!({"upstream": "http://127.0.0.1:1",
            "environments": {"prod": {"sdkKey": KEY, "payloadFilters": filters}}});
        let err = flagsync_server::RelayConfig::parse(file.to_string().as_bytes()).unwrap_err();
        assert!(err.contains(what), "{err}");
    }
}

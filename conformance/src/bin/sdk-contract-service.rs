//! The SDK contract service for LaunchDarkly's sdk-test-harness (see
//! `flagsync_conformance::sdk_service`).
//!
//! `sdk-contract-service [--port N] [--runtime tokio|smol|async-std] [--capability NAME]…`
//! listens on `127.0.0.1:N` (default 8000); the clients run on the runtime named
//! (default tokio). `--capability` declares a capability beyond the ones that pass (to
//! run a group that is being worked on).

use flagsync_conformance::sdk_service::Service;
use flagsync_conformance::sdk_service::runtime::ServiceRuntime;
use flagsync_conformance::service_http::serve;

fn usage() -> ! {
    eprintln!(
        "usage: sdk-contract-service [--port N] [--runtime tokio|smol|async-std] [--capability NAME]...\n  listens on 127.0.0.1 (default port 8000, runtime tokio)"
    );
    std::process::exit(2);
}

fn main() {
    let mut port: u16 = 8000;
    let mut runtime = "tokio".to_owned();
    let mut extra = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .unwrap_or_else(|| usage())
        };
        match name.as_str() {
            "--port" | "-p" => port = value().parse().unwrap_or_else(|_| usage()),
            "--runtime" => runtime = value(),
            "--capability" => extra.push(value()),
            _ => usage(),
        }
    }
    let Some(runtime) = ServiceRuntime::named(&runtime) else {
        usage()
    };
    eprintln!("sdk-contract-service: clients run on {}", runtime.name());
    let service = Service::new(runtime).with_extra_capabilities(extra);
    let e = serve("sdk-contract-service", port, move |req| service.handle(req));
    eprintln!("sdk-contract-service: cannot listen on 127.0.0.1:{port}: {e}");
    std::process::exit(1);
}

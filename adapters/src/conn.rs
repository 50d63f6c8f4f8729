//! The connection task: a byte pump that makes no decisions.
//!
//! connect (an `https` endpoint through an HTTP `CONNECT` tunnel if a proxy applies;
//! an `http` one through the proxy, which forwards the request) → TLS if the endpoint
//! asks for it → write the request → report `Connected` → report every read as `Data` →
//! report `Closed { cause }`. Cancelling the task (dropping its cancel sender) or
//! dropping it drops the socket, which closes it.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use flagsync_core::endpoint::Endpoint;
use flagsync_core::{CloseCause, ConnId, IoCause};
use futures_lite::{AsyncReadExt, AsyncWriteExt};

use crate::inbox::{Msg, TaskGuard};
use crate::proxy::{Proxy, ProxySettings};
use crate::runtime::{BoxIo, Runtime, race};

/// Read buffer size of a connection.
const READ_BUF: usize = 64 * 1024;

/// How connections are made: proxy and TLS settings, shared by every task.
#[derive(Debug, Default)]
pub(crate) struct ConnConfig {
    pub(crate) proxy: ProxySettings,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::tls::TlsConnector>,
}

/// Run one connection until it ends or is cancelled.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<C: Send>(
    rt: Arc<dyn Runtime>,
    config: Arc<ConnConfig>,
    conn: ConnId,
    endpoint: Endpoint,
    request: Bytes,
    tx: async_channel::Sender<Msg<C>>,
    cancel: async_channel::Receiver<()>,
    _guard: Arc<TaskGuard>,
) {
    let pump = pump(&*rt, &config, conn, &endpoint, &request, &tx);
    match race(pump, cancel.recv()).await {
        Ok(cause) => {
            tracing::debug!(%conn, ?cause, "connection closed");
            let _ = tx.send(Msg::Closed(conn, cause)).await;
        }
        Err(_) => tracing::trace!(%conn, "connection cancelled"),
    }
}

async fn pump<C: Send>(
    rt: &dyn Runtime,
    config: &ConnConfig,
    conn: ConnId,
    endpoint: &Endpoint,
    request: &[u8],
    tx: &async_channel::Sender<Msg<C>>,
) -> CloseCause {
    // A plain-http request goes to the proxy itself, in absolute form (RFC 9112 §3.2.2):
    // what HTTP proxies expect, where many refuse `CONNECT` to any port but 443.
    let forward = config
        .proxy
        .for_endpoint(endpoint)
        .filter(|_| !endpoint.tls);
    let opened = match forward {
        Some(proxy) => rt.connect(&proxy.host, proxy.port).await,
        None => open(rt, config, endpoint).await,
    };
    let mut io = match opened {
        Ok(io) => io,
        Err(e) => return io_cause(e),
    };
    let forwarded;
    let request = match forward {
        Some(proxy) => {
            forwarded = forward_request(request, endpoint, proxy);
            &forwarded[..]
        }
        None => request,
    };
    if let Err(e) = async {
        io.write_all(request).await?;
        io.flush().await
    }
    .await
    {
        return io_cause(e);
    }
    tracing::debug!(%conn, host = %endpoint.host, port = endpoint.port, "connected");
    if tx.send(Msg::Connected(conn)).await.is_err() {
        return CloseCause::Eof;
    }
    let mut buf = vec![0u8; READ_BUF];
    loop {
        match io.read(&mut buf).await {
            Ok(0) => return CloseCause::Eof,
            Ok(n) => {
                tracing::trace!(%conn, bytes = n, "read");
                let chunk = buf.get(..n).unwrap_or_default().to_vec();
                if tx.send(Msg::Data(conn, chunk)).await.is_err() {
                    return CloseCause::Eof;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return io_cause(e),
        }
    }
}

fn io_cause(e: io::Error) -> CloseCause {
    CloseCause::Io(IoCause {
        kind: e.kind(),
        message: e.to_string(),
    })
}

/// `request` (origin form, as the core writes it) for an HTTP proxy: the target in
/// absolute form, then `Proxy-Authorization` when the proxy URL has credentials. A
/// request line that is not in origin form is left as it is.
fn forward_request(request: &[u8], endpoint: &Endpoint, proxy: &Proxy) -> Vec<u8> {
    let line_end = request
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(request.len());
    let line = &request[..line_end];
    let mut parts = line.splitn(3, |b| *b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return request.to_vec();
    };
    if !target.starts_with(b"/") {
        return request.to_vec();
    }
    let mut out = Vec::with_capacity(request.len() + 128);
    out.extend_from_slice(method);
    out.extend_from_slice(b" http://");
    out.extend_from_slice(endpoint_authority(endpoint).as_bytes());
    out.extend_from_slice(target);
    out.push(b' ');
    out.extend_from_slice(version);
    out.extend_from_slice(b"\r\n");
    if let Some(auth) = &proxy.authorization {
        out.extend_from_slice(b"Proxy-Authorization: ");
        out.extend_from_slice(auth.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(request.get(line_end + 2..).unwrap_or_default());
    out
}

/// TCP (through a `CONNECT` tunnel if a proxy applies), then TLS if `endpoint.tls`.
async fn open(rt: &dyn Runtime, config: &ConnConfig, endpoint: &Endpoint) -> io::Result<BoxIo> {
    let io = match config.proxy.for_endpoint(endpoint) {
        Some(proxy) => tunnel(rt, proxy, endpoint).await?,
        None => rt.connect(&endpoint.host, endpoint.port).await?,
    };
    if !endpoint.tls {
        return Ok(io);
    }
    #[cfg(feature = "tls")]
    match &config.tls {
        Some(tls) => tls.connect(&endpoint.host, io).await,
        None => Err(io::Error::other("TLS is not configured")),
    }
    #[cfg(not(feature = "tls"))]
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "https needs the `rustls` feature of flagsync",
    ))
}

/// Connect to `proxy` and open an HTTP `CONNECT` tunnel to `endpoint`.
async fn tunnel(rt: &dyn Runtime, proxy: &Proxy, endpoint: &Endpoint) -> io::Result<BoxIo> {
    let mut io = rt.connect(&proxy.host, proxy.port).await?;
    let authority = endpoint_authority(endpoint);
    let mut req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = &proxy.authorization {
        req.push_str("Proxy-Authorization: ");
        req.push_str(auth);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    io.write_all(req.as_bytes()).await?;
    io.flush().await?;
    // Read the response head byte by byte: nothing after it may be consumed.
    let mut head = Vec::with_capacity(128);
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 8192 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "proxy response head too long",
            ));
        }
        let mut byte = [0u8; 1];
        if io.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "proxy closed the connection during CONNECT",
            ));
        }
        head.extend_from_slice(&byte);
    }
    let status_line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let status = std::str::from_utf8(status_line)
        .ok()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok());
    match status {
        Some(200..=299) => {
            tracing::debug!(proxy = %proxy.host, port = proxy.port, "proxy tunnel open");
            Ok(io)
        }
        Some(code) => Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("proxy refused CONNECT with HTTP {code}"),
        )),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "malformed proxy response",
        )),
    }
}

fn endpoint_authority(endpoint: &Endpoint) -> String {
    if endpoint.host.contains(':') {
        format!("[{}]:{}", endpoint.host, endpoint.port)
    } else {
        format!("{}:{}", endpoint.host, endpoint.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(host: &str, port: u16) -> Endpoint {
        Endpoint {
            tls: false,
            host: host.into(),
            port,
        }
    }

    #[test]
    fn a_forwarded_request_names_its_target_in_absolute_form() {
        let proxy = Proxy {
            host: "proxy".into(),
            port: 3128,
            authorization: Some("Basic dTpw".into()),
        };
        let req =
            b"GET /all?filter=x HTTP/1.1\r\nHost: stream.example:8080\r\nAuthorization: k\r\n\r\n";
        let out = forward_request(req, &endpoint("stream.example", 8080), &proxy);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET http://stream.example:8080/all?filter=x HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\
             Host: stream.example:8080\r\nAuthorization: k\r\n\r\n"
        );
        let ipv6 = forward_request(
            b"GET / HTTP/1.1\r\n\r\n",
            &endpoint("::1", 80),
            &Proxy {
                authorization: None,
                ..proxy.clone()
            },
        );
        assert_eq!(ipv6, b"GET http://[::1]:80/ HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn a_request_not_in_origin_form_is_left_alone() {
        let proxy = Proxy {
            host: "p".into(),
            port: 1,
            authorization: None,
        };
        for req in [&b"garbage"[..], b"GET http://a/ HTTP/1.1\r\n\r\n", b""] {
            assert_eq!(forward_request(req, &endpoint("a", 80), &proxy), req);
        }
    }
}

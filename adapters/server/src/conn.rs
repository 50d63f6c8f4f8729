//! Connections: the accept loop and one thread per connection, reading requests
//! and handing them to the routes; a stream's connection goes to the stream hub and
//! its thread ends.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::{self};
use std::time::Duration;

use crate::http::{Framing, WRITE_TIMEOUT, write_response};
use crate::reader::{ReadError, RequestReader};

use crate::fault::Endpoint;
use crate::http;
use crate::recorded::RecordedRequest;
use crate::routes::{FALLBACK_HEADER, Routed, accepted, route};
use crate::state::Shared;

/// How long an idle keep-alive connection is kept open.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How many requests [`ServerHandle::requests`] remembers.
pub(crate) const MAX_RECORDED: usize = 1000;
/// How long a refused request's unread body is read and discarded before closing.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

pub(crate) fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    loop {
        let conn = listener.accept();
        if shared.is_shutting_down() {
            return;
        }
        let (stream, _) = match conn {
            Ok(c) => c,
            Err(_) => {
                // E.g. out of file descriptors: back off briefly.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let mut inner = shared.lock();
        if shared.is_shutting_down() {
            return;
        }
        inner.threads.retain(|t| !t.is_finished());
        let id = inner.next_id;
        inner.next_id += 1;
        if let Ok(clone) = stream.try_clone() {
            inner.conns.insert(id, clone);
        }
        let conn_shared = shared.clone();
        let spawned = thread::Builder::new()
            .name("flagsync-server-conn".into())
            .spawn(move || {
                handle_connection(&conn_shared, stream);
                conn_shared.lock().conns.remove(&id);
            });
        match spawned {
            Ok(t) => inner.threads.push(t),
            Err(_) => {
                if let Some(c) = inner.conns.remove(&id) {
                    let _ = c.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }
}

pub(crate) fn handle_connection(shared: &Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut reader = RequestReader::new(shared.max_body);
    loop {
        let mut req = match reader.read_head(&mut stream) {
            Ok(r) => r,
            Err(ReadError::Bad(status)) => {
                refuse(&mut stream, status);
                break;
            }
            Err(ReadError::Eof | ReadError::Io) => break,
        };
        let endpoint = Endpoint::of_path(req.path());
        // A client that waits for `100 Continue` is answered without its body when the
        // request is refused anyway (RFC 9110 §10.1.1); the unread body then ends the
        // connection.
        let mut unread_body = false;
        if req.framing != Framing::None {
            if req.expects_continue && accepted(shared, &req, endpoint).is_err() {
                unread_body = true;
                req.close = true;
            } else {
                if req.expects_continue && http::write_continue(&mut stream).is_err() {
                    break;
                }
                match reader.read_body(&mut stream, &mut req) {
                    Ok(()) => {}
                    Err(ReadError::Bad(status)) => {
                        refuse(&mut stream, status);
                        break;
                    }
                    Err(ReadError::Eof | ReadError::Io) => break,
                }
            }
        }
        if shared.is_shutting_down() {
            break;
        }
        let (fault, fallback) = {
            let mut inner = shared.lock();
            inner.request_count += 1;
            if inner.requests.len() >= MAX_RECORDED {
                inner.requests.pop_front();
            }
            inner.requests.push_back(RecordedRequest {
                method: req.method.clone(),
                target: req.target.clone(),
                headers: req.headers.clone(),
            });
            if inner.faults.hangs(endpoint) {
                // Hold the connection unanswered until unhung or shut down.
                while inner.faults.hangs(endpoint) && !shared.is_shutting_down() {
                    inner = shared.unhang.wait(inner).unwrap_or_else(|e| e.into_inner());
                }
                break;
            }
            let fallback = inner.faults.fdv1_fallback && endpoint.is_some_and(Endpoint::is_fdv2);
            (inner.faults.take_failure(endpoint), fallback)
        };
        let mut headers = vec![("Content-Type", "application/json")];
        if fallback {
            headers.push(FALLBACK_HEADER);
        }
        let keep = match fault {
            Some(status) => {
                let body = format!("{{\"message\":\"injected fault: HTTP {status}\"}}");
                write_response(&mut stream, status, &headers, body.as_bytes(), req.close).is_ok()
            }
            None => match route(shared, &req, endpoint, &headers, &mut stream) {
                Routed::Done(ok) => ok,
                // The stream hub holds the connection now.
                Routed::Streamed => return,
            },
        };
        if unread_body && keep {
            http::linger(&mut stream, LINGER);
        }
        if !keep || req.close {
            break;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Answer a request that cannot be read (malformed, too large) with `status`, then
/// drain what the client still sends for a while, so that closing does not reset the
/// connection before the client has read the answer.
fn refuse(stream: &mut TcpStream, status: u16) {
    if write_response(stream, status, &[], b"", true).is_ok() {
        http::linger(stream, LINGER);
    }
}

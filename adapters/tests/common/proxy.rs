//! A small HTTP proxy on std threads: `CONNECT` tunnels, and plain requests in absolute
//! form forwarded to their origin.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

pub struct Proxy {
    pub port: u16,
    /// The CONNECT request heads received.
    pub connects: Arc<Mutex<Vec<String>>>,
    /// The heads of the requests forwarded (absolute form, as received).
    pub forwarded: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    pub fn start() -> Self {
        Self::start_to(None)
    }

    /// A proxy whose `CONNECT` tunnels all go to `127.0.0.1:port`, whatever host they
    /// name: a client can then reach a local server under any host name.
    pub fn start_redirecting_to(port: u16) -> Self {
        Self::start_to(Some(format!("127.0.0.1:{port}")))
    }

    fn start_to(redirect: Option<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connects = Arc::new(Mutex::new(Vec::new()));
        let forwarded = Arc::new(Mutex::new(Vec::new()));
        let (log, flog) = (connects.clone(), forwarded.clone());
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (log, flog, redirect) = (log.clone(), flog.clone(), redirect.clone());
                thread::spawn(move || tunnel(client, &log, &flog, redirect.as_deref()));
            }
        });
        Self {
            port,
            connects,
            forwarded,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn tunnel(
    mut client: TcpStream,
    log: &Mutex<Vec<String>>,
    forwarded: &Mutex<Vec<String>>,
    redirect: Option<&str>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut words = head.split(' ');
    let method = words.next().unwrap_or_default().to_owned();
    let target = words.next().unwrap_or_default().to_owned();
    let upstream = if method == "CONNECT" {
        log.lock().unwrap().push(head.clone());
        let Ok(upstream) = TcpStream::connect(redirect.unwrap_or(&target)) else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            return;
        };
        let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
        upstream
    } else {
        // `GET http://host:port/path HTTP/1.1`: to the origin, in origin form.
        forwarded.lock().unwrap().push(head.clone());
        let Some(rest) = target.strip_prefix("http://") else {
            let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            return;
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let Ok(mut upstream) = TcpStream::connect(authority) else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            return;
        };
        let origin_form = head.replacen(&target, if path.is_empty() { "/" } else { path }, 1);
        let _ = upstream.write_all(origin_form.as_bytes());
        upstream
    };
    let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
    let (mut c1, mut u1) = (client, upstream);
    let t = thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut u2);
        let _ = u2.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut u1, &mut c1);
    let _ = c1.shutdown(Shutdown::Both);
    let _ = t.join();
}

//! No thread per connection: idle connections and slow senders cost the server no
//! thread. (A test binary of its own: no other test starts threads beside it.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use flagsync_server::Server;
use serde_json::json;

/// This process's thread count.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

#[test]
fn idle_connections_and_slow_senders_take_no_thread_and_polls_are_answered_beside_them() {
    let server = Server::builder()
        .data(json!({"flagValues": {"a": true}}))
        .start()
        .unwrap();
    let before = threads();
    let idle: Vec<TcpStream> = (0..300).map(|_| connect(server.addr())).collect();
    let slow: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut s = connect(server.addr());
            s.write_all(b"GET /sdk/latest-all HTTP/1.1\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    let during = threads();
    assert!(
        during <= before,
        "{during} threads with 400 connections, {before} before"
    );
    let started = Instant::now();
    let mut s = connect(server.addr());
    write!(
        s,
        "GET /sdk/latest-all HTTP/1.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut line = String::new();
    let mut r = BufReader::new(s);
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    drop((idle, slow));
}

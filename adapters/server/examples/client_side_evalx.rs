//! `evalx` for one context over a data file, timed: the client-side polling endpoint
//! (`GET /sdk/evalx/{envId}/contexts/{context}`) of an in-process server, on one
//! keep-alive connection, from the request's write to the body's last byte.
//!
//! ```sh
//! python3 /work/shared/tools/gen_payload.py --size medium -o /tmp/medium.json
//! # every flag available to client-side SDKs (usingEnvironmentId), as BENCHMARKS.md says
//! cargo run --release -p flagsync-server --example client_side_evalx -- /tmp/medium-cs.json \
//!     [--reasons] [--runs 200] [--out BODY_FILE]
//! ```
//!
//! Prints the body's size and the median, p10, p90 and minimum of the runs (after 10
//! unmeasured ones, which also compile every flag once).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use flagsync_server::Server;
use serde_json::Value;

const ENV_ID: &str = "env1";
const CONTEXT: &str = r#"{"kind":"user","key":"u-123","plan":"gold"}"#;

/// Base64url without padding, as the SDKs put a context in a path.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// One `GET` on `conn`: the status and the body (`Content-Length` framed).
fn get(conn: &mut BufReader<TcpStream>, target: &str) -> (u16, Vec<u8>) {
    let req = format!("GET {target} HTTP/1.1\r\nHost: bench\r\nAccept: application/json\r\n\r\n");
    conn.get_mut().write_all(req.as_bytes()).unwrap();
    let mut line = String::new();
    conn.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = 0;
    loop {
        line.clear();
        conn.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    conn.read_exact(&mut body).unwrap();
    (status, body)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    let mut reasons = false;
    let mut runs = 200;
    let mut out = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--reasons" => reasons = true,
            "--runs" => runs = args.next().unwrap().parse().unwrap(),
            "--out" => out = args.next(),
            _ => path = Some(arg),
        }
    }
    let path = path.expect("usage: client_side_evalx DATA_FILE [--reasons] [--runs N]");
    let data: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let flags = data["flags"].as_object().map_or(0, |f| f.len());
    let server = Server::builder()
        .data(data)
        .client_side_id(Some(ENV_ID.to_owned()))
        .start()
        .unwrap();
    let target = format!(
        "/sdk/evalx/{ENV_ID}/contexts/{}{}",
        base64url(CONTEXT.as_bytes()),
        if reasons { "?withReasons=true" } else { "" }
    );
    let mut conn = BufReader::with_capacity(1 << 16, TcpStream::connect(server.addr()).unwrap());
    conn.get_mut().set_nodelay(true).unwrap();
    let (status, body) = get(&mut conn, &target);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    if let Some(out) = out {
        std::fs::write(out, &body).unwrap();
    }
    for _ in 0..10 {
        get(&mut conn, &target);
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let (_, body) = get(&mut conn, &target);
            assert!(!body.is_empty());
            start.elapsed()
        })
        .collect();
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "evalx, {flags} flags{}: {} bytes; {runs} runs: median {:.3} ms, p10 {:.3}, p90 {:.3}, min {:.3}",
        if reasons { ", with reasons" } else { "" },
        body.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.1).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
    );
}

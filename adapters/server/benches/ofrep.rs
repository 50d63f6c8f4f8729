//! OFREP evaluations over one keep-alive loopback connection.
//!
//! - `*_roundtrip`: one request at a time, from its first byte written to the
//!   response's last byte read: the server's time plus the loopback and two thread
//!   wake-ups, so an upper bound that depends on the machine's load.
//! - `*_pipelined`: [`PIPELINED`] requests written at once and their responses read,
//!   the time divided by their number: the server answers them back to back without
//!   waiting for the client, so this is its time per request (parse, authorize, read
//!   the context, evaluate, render, record the analytics event, write), the client's
//!   reading of the responses included.
//!
//! The target is a single-flag evaluation within 50 µs of server time.
//!
//! `cargo bench -p flagsync-server --bench ofrep`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync_server::Server;
use serde_json::Value;

const DATA: &str = include_str!("../tests/data/ofrep.json");

/// Requests written at once in the pipelined benches.
const PIPELINED: u32 = 32;

struct Client {
    w: TcpStream,
    r: BufReader<TcpStream>,
    line: String,
    body: Vec<u8>,
}

impl Client {
    /// One request, its response read whole; the status.
    fn post(&mut self, request: &[u8]) -> u16 {
        self.w.write_all(request).unwrap();
        self.read()
    }

    /// `n` requests at once, then their responses; the time per request.
    fn pipelined(&mut self, requests: &[u8], n: u32) -> Duration {
        let start = Instant::now();
        self.w.write_all(requests).unwrap();
        for _ in 0..n {
            assert_eq!(self.read(), 200);
        }
        start.elapsed() / n
    }

    /// One response, read whole; its status.
    fn read(&mut self) -> u16 {
        self.line.clear();
        self.r.read_line(&mut self.line).unwrap();
        let status = self.line[9..12].parse().unwrap();
        let mut len = 0;
        loop {
            self.line.clear();
            self.r.read_line(&mut self.line).unwrap();
            let l = self.line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((n, v)) = l.split_once(':')
                && n.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap();
            }
        }
        self.body.resize(len, 0);
        self.r.read_exact(&mut self.body).unwrap();
        status
    }
}

fn request(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer sdk-bench\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let data: Value = serde_json::from_str(DATA).unwrap();
    let server = Server::builder()
        .sdk_key(Some("sdk-bench".into()))
        .data(data)
        .start()
        .unwrap();
    let w = TcpStream::connect(server.addr()).unwrap();
    w.set_nodelay(true).unwrap();
    let mut client = Client {
        r: BufReader::new(w.try_clone().unwrap()),
        w,
        line: String::new(),
        body: Vec::new(),
    };
    let context = r#"{"context":{"targetingKey":"u2","email":"ann@vip.example","plan":"gold"}}"#;
    let single = request("/ofrep/v1/evaluate/flags/rule-flag", context);
    let bulk = request("/ofrep/v1/evaluate/flags", context);
    assert_eq!(client.post(&single), 200);
    assert_eq!(client.post(&bulk), 200);
    let mut g = c.benchmark_group("ofrep");
    g.bench_function("single_flag_roundtrip", |b| {
        b.iter(|| client.post(&single));
    });
    g.bench_function("bulk_16_flags_roundtrip", |b| {
        b.iter(|| client.post(&bulk));
    });
    for (name, one) in [
        ("single_flag_pipelined", &single),
        ("bulk_16_flags_pipelined", &bulk),
    ] {
        let many = one.repeat(PIPELINED as usize);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| client.pipelined(&many, PIPELINED)).sum());
        });
    }
    g.finish();
    server.shutdown();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! A raw HTTP/1.1 test client's pieces, shared by the tests that post to the server.
#![allow(dead_code)]

pub mod client;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// `bytes` gzipped.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// A response: its status, its headers, and a `Content-Length` body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Read a response head from `r`: the status and the headers.
pub fn read_head(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("bad status line {line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_owned(), v.trim().to_owned()));
    }
    (status, headers)
}

/// Read one response (head, then a `Content-Length` body) from `r`.
pub fn read_response(r: &mut BufReader<TcpStream>) -> Response {
    let (status, headers) = read_head(r);
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if let Some(len) = resp.header("content-length") {
        let mut body = vec![0; len.parse().unwrap()];
        r.read_exact(&mut body).unwrap();
        resp.body = body;
    }
    resp
}

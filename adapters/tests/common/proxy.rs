//! A small HTTP CONNECT proxy on std threads.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

pub struct Proxy {
    pub port: u16,
    /// The CONNECT request heads received.
    pub connects: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connects = Arc::new(Mutex::new(Vec::new()));
        let log = connects.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let log = log.clone();
                thread::spawn(move || tunnel(client, &log));
            }
        });
        Self { port, connects }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn tunnel(mut client: TcpStream, log: &Mutex<Vec<String>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    log.lock().unwrap().push(head.clone());
    let target = head.split(' ').nth(1).unwrap_or_default().to_owned();
    let Ok(upstream) = TcpStream::connect(&target) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
        return;
    };
    let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
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

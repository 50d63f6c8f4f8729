//! The local flag server's request reader (`flagsync-server`): a connection's bytes in
//! arbitrary pieces, read request after request (heads, `Content-Length` and chunked
//! bodies, trailers, pipelining). No panic; no body past the limit; the reader ends.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, Vec<u8>, &[u8])| {
    let (max_body, splits, data) = input;
    let (_bodies, status) =
        flagsync_server::fuzzing::read_requests(data, &splits, usize::from(max_body));
    if let Some(status) = status {
        assert!(matches!(status, 400 | 413 | 431 | 501), "status {status}");
    }
});

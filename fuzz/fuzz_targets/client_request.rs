//! What the server reads of a client-side, mobile or OFREP request before it evaluates:
//! a path (which endpoint; a context in base64), a body (a context as JSON), an OFREP
//! evaluation context. No panic, whatever the bytes. The base64 reading takes what
//! either alphabet writes, padded or not, and gives the bytes back; a context in the
//! path (URL-safe) reads as the same context in a `REPORT` body; an OFREP context is
//! read or refused, never a panic.
#![no_main]

use arbitrary::Arbitrary;
use flagsync_server::fuzzing::{client_side_base64, client_side_request};
use flagsync_server::ofrep_context;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    path: &'a str,
    body: &'a [u8],
    /// Bytes to encode in base64 and put in a path, as the SDKs do.
    context: &'a [u8],
    url_safe: bool,
    padded: bool,
    mobile: bool,
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// RFC 4648 base64 of `bytes`, written independently of the server's reader.
fn encode(bytes: &[u8], url_safe: bool, padded: bool) -> String {
    let alphabet = if url_safe { URL_SAFE } else { STANDARD };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let mut b = [0u8; 3];
        b[..chunk.len()].copy_from_slice(chunk);
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 63) as usize]));
        }
        if padded {
            out.extend(std::iter::repeat_n('=', 3 - chunk.len()));
        }
    }
    out
}

fuzz_target!(|input: Input<'_>| {
    // Any path and body: an answer, never a panic.
    let _ = client_side_request(input.path, input.body);
    let _ = client_side_base64(input.path);

    // The base64 reading gives back what either alphabet wrote.
    let text = encode(input.context, input.url_safe, input.padded);
    assert_eq!(
        client_side_base64(&text).as_deref(),
        Some(input.context),
        "{text}"
    );

    // A context in the path (URL-safe base64, as the SDKs write it: the standard
    // alphabet's `/` would split the path) reads as the same bytes in a REPORT body.
    let text = encode(input.context, true, input.padded);
    let (get, report) = if input.mobile {
        (
            format!("/msdk/evalx/contexts/{text}"),
            "/msdk/evalx/context".to_owned(),
        )
    } else {
        (
            format!("/sdk/evalx/env/contexts/{text}"),
            "/sdk/evalx/env/context".to_owned(),
        )
    };
    let from_path = client_side_request(&get, b"").expect("an evalx path");
    let from_body = client_side_request(&report, input.context).expect("an evalx path");
    assert_eq!(from_path.is_some(), from_body.is_some());
    assert_eq!(
        from_path.map(|r| r.ok()),
        from_body.map(|r| r.ok()),
        "the path and the body read different contexts"
    );

    // An OFREP context: a context or an error, whatever the JSON.
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(input.body) {
        let _ = ofrep_context(&value);
        let _ = ofrep_context(&serde_json::json!({ "targetingKey": "k", "nested": value }));
    }
});

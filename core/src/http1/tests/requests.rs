//! The request writer.

use super::*;

// ---- requests -------------------------------------------------------------------------

#[test]
fn request_without_body() {
    let request = RequestHead {
        method: Method::Get,
        target: "/all?filter=x".into(),
        host: "stream.example.com:8443".into(),
        headers: vec![
            ("Authorization".into(), "sdk-1".into()),
            ("Accept".into(), "text/event-stream".into()),
        ],
    };
    let mut out = b"prefix".to_vec();
    request.write_to(None, &mut out);
    assert_eq!(
        out,
        b"prefixGET /all?filter=x HTTP/1.1\r\nHost: stream.example.com:8443\r\n\
          Authorization: sdk-1\r\nAccept: text/event-stream\r\n\r\n"
    );
}

#[test]
fn request_with_body() {
    for (method, name) in [
        (Method::Post, "POST"),
        (Method::Report, "REPORT"),
        (Method::Get, "GET"),
    ] {
        let request = RequestHead {
            method,
            target: "/e".into(),
            host: "h".into(),
            headers: vec![],
        };
        let mut out = Vec::new();
        request.write_to(Some(b"{\"k\":1}"), &mut out);
        let expected =
            format!("{name} /e HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n\r\n{{\"k\":1}}");
        assert_eq!(out, expected.as_bytes());
        assert_eq!(method.as_str(), name);
    }
    let request = RequestHead {
        method: Method::Post,
        target: "/".into(),
        host: "h".into(),
        headers: vec![],
    };
    let mut out = Vec::new();
    request.write_to(Some(b""), &mut out);
    assert_eq!(
        out,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
    );
    let mut out = Vec::new();
    request.write_to(Some(&[b'x'; 12345]), &mut out);
    assert!(out.starts_with(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12345\r\n\r\nxx"));
}

#[test]
fn request_fields_cannot_inject_lines() {
    let request = RequestHead {
        method: Method::Get,
        target: "/a\r\nX: y".into(),
        host: "h\n".into(),
        headers: vec![("K".into(), "v\r\nEvil: 1\0".into())],
    };
    let mut out = Vec::new();
    request.write_to(None, &mut out);
    assert_eq!(
        out,
        b"GET /a  X: y HTTP/1.1\r\nHost: h \r\nK: v  Evil: 1 \r\n\r\n"
    );
}

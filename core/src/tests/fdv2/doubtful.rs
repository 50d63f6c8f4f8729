//! Doubtful data is taken as LaunchDarkly's SDKs take it, and always reported as a
//! warning with its keys (issue 42; `crate::store::doubts`, `ApplyMode::Fdv2`). The
//! warnings go through `tracing`, which the SDK's subscriber shows: these tests capture
//! them with a subscriber of their own for the test's thread.

use std::cell::RefCell;
use std::io::Write;

use bytes::Bytes;

use super::*;

thread_local! {
    static LOG: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

struct ThreadLog;

impl Write for ThreadLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.with(|l| l.borrow_mut().extend_from_slice(buf));
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Run `f` and return what it logged at WARN and above, one line each.
fn warnings(f: impl FnOnce()) -> String {
    LOG.with(|l| l.borrow_mut().clear());
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(|| ThreadLog)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    LOG.with(|l| String::from_utf8_lossy(&l.borrow()).into_owned())
}

fn fdv1_stream(body: &[u8]) -> Harness {
    let mut h = harness(config(Mode::Streaming));
    let mut r = Response::sse("", End::Hang);
    r.chunks = vec![(Duration::ZERO, Bytes::copy_from_slice(body))];
    h.reply(Reply::Respond(r));
    h
}

#[test]
fn an_older_fdv2_change_is_applied_with_a_warning_naming_it() {
    // The harness's "ignores model version": the later payload wins, whatever the
    // versions inside. Applied, then, but never silently.
    let mut h = fdv2(stream_only());
    let body = full(&[("a", 100), ("b", 7), ("c", 1)], "s1")
        + &intent("xfer-changes")
        + &put_flag("a", 1)
        + &delete_flag("b", 7)
        + &put_flag("c", 2)
        + &transferred("s2", 2);
    h.reply_to(STREAM, stream(&body));
    let log = warnings(|| h.start(ms(500)));
    assert_eq!(flags(&h), kv(&[("a", 1), ("c", 2)]));
    let line = log
        .lines()
        .find(|l| l.contains("no newer than the stored items"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("count=2") && line.contains("deletions=1"),
        "{line}"
    );
    assert!(
        line.contains(r#"features:"a" (put v1 <= stored v100)"#),
        "{line}"
    );
    assert!(
        line.contains(r#"features:"b" (delete v7 <= stored v7)"#),
        "{line}"
    );
    assert!(
        !line.contains(r#""c""#),
        "a newer change is not doubtful: {line}"
    );
}

#[test]
fn an_older_fdv1_patch_is_ignored_without_a_warning() {
    let body = put(&[("a", 5)], &[]) + &patch(Kind::Flag, "a", 4);
    let mut h = fdv1_stream(body.as_bytes());
    let log = warnings(|| h.start(ms(10)));
    assert_eq!(h.system.snapshot().get(Kind::Flag, "a").unwrap().version, 5);
    assert!(!log.contains("no newer"), "{log}");
}

#[test]
fn a_put_item_naming_another_key_is_stored_under_its_map_key_with_a_warning() {
    let body = "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{\"a\":{\"key\":\"b\",\"version\":1}},\"segments\":{\"s\":{\"key\":\"s\",\"version\":1}}}}\n\n";
    let mut h = fdv1_stream(body.as_bytes());
    let log = warnings(|| h.start(ms(10)));
    let snap = h.system.snapshot();
    assert!(snap.get(Kind::Flag, "a").is_some());
    assert!(snap.get(Kind::Flag, "b").is_none());
    assert!(
        log.contains("body names another key")
            && log.contains(r#"features:"a" (body key "b")"#)
            && log.contains("count=1"),
        "{log}"
    );
}

#[test]
fn an_fdv2_object_naming_another_key_is_stored_under_the_envelope_key_with_a_warning() {
    let mut h = fdv2(stream_only());
    let body = intent("xfer-full")
        + &sse(
            "put-object",
            r#"{"version":1,"kind":"segment","key":"s1","object":{"key":"s2","version":1}}"#,
        )
        + &transferred("s", 1);
    h.reply_to(STREAM, stream(&body));
    let log = warnings(|| h.start(ms(500)));
    assert!(h.system.snapshot().get(Kind::Segment, "s1").is_some());
    assert!(log.contains(r#"segments:"s1" (body key "s2")"#), "{log}");
}

#[test]
fn a_patch_naming_another_key_than_its_path_warns_with_both() {
    let body = put(&[], &[])
        + "event: patch\ndata: {\"path\":\"/flags/a\",\"data\":{\"key\":\"b\",\"version\":1}}\n\n";
    let mut h = fdv1_stream(body.as_bytes());
    let log = warnings(|| h.start(ms(10)));
    // The object's key, as PROTOCOL.md B §1.6 (and the Python SDK) says.
    assert!(h.system.snapshot().get(Kind::Flag, "b").is_some());
    assert!(
        log.contains("names another key in its object than in its path")
            && log.contains(r#"path_key="a""#)
            && log.contains(r#"body_key="b""#),
        "{log}"
    );
}

#[test]
fn a_key_that_is_not_utf8_is_stored_with_a_replacement_character_and_a_warning() {
    let mut body = b"event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{\"a".to_vec();
    body.push(0xFF);
    body.extend_from_slice(b"\":{\"key\":\"a");
    body.push(0xFF);
    body.extend_from_slice(b"\",\"version\":1}},\"segments\":{}}}\n\n");
    let mut h = fdv1_stream(&body);
    let log = warnings(|| h.start(ms(10)));
    assert!(h.system.snapshot().get(Kind::Flag, "a\u{FFFD}").is_some());
    assert!(
        log.contains("not valid UTF-8") && log.contains("features:\"a\u{FFFD}\""),
        "{log}"
    );
    // Map key and body key went through the same decoding: no mismatch reported.
    assert!(!log.contains("body names another key"), "{log}");
}

#[test]
fn good_data_logs_no_warning() {
    let mut h = fdv2(stream_only());
    let body = full(&[("a", 1)], "s1")
        + &intent("xfer-changes")
        + &put_flag("a", 2)
        + &delete_flag("b", 1)
        + &transferred("s2", 2);
    h.reply_to(STREAM, stream(&body));
    let log = warnings(|| h.start(ms(500)));
    assert_eq!(flags(&h), kv(&[("a", 2)]));
    assert_eq!(log, "");
}

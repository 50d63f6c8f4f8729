//! The bound on an FDv2 payload that has not been committed yet (issue 33).
//!
//! Between `server-intent` and `payload-transferred` every `put-object` and
//! `delete-object` is held, invisible, until the payload completes (PROTOCOL.md E 28).
//! An FDv1 `put` is bounded by the SSE event limit; the FDv2 payload is spread over
//! many events, so it gets a bound of its own.

/// How much of an uncommitted FDv2 payload a [`super::Protocol`] may hold before
/// `payload-transferred`.
///
/// Each held object counts the bytes of its raw JSON plus its key (a tombstone counts
/// its `{"key":…,"version":N,"deleted":true}`), and one object. Going over either bound
/// drops the partial payload and fails with [`super::Error::PayloadTooLarge`] or
/// [`super::Error::TooManyObjects`]: INVALID_DATA, the connection is closed and retried
/// with backoff (a poll is retried at its interval), and the store keeps what it had.
///
/// A held object's raw JSON is a slice of the bytes read from the network, so it also
/// keeps the SSE framing of its event alive (`event: put-object`, the envelope: a few
/// dozen bytes per object for a well-behaved server). That is not counted.
///
/// ```
/// use flagsync_core::fdv2::PayloadLimits;
///
/// let limits = PayloadLimits::default();
/// assert_eq!(limits.max_bytes, 64 << 20); // the FDv1 `put` (SSE event) limit
/// assert_eq!(limits.max_objects, 524_288);
/// assert_eq!(PayloadLimits::for_bytes(4 << 20).max_objects, 32_768);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadLimits {
    /// The most bytes held (raw JSON plus key of every object), inclusive. Default
    /// 64 MiB, the default SSE event limit, so that an FDv2 full transfer may be as
    /// large as the largest FDv1 `put`.
    pub max_bytes: usize,
    /// The most objects held, inclusive. Default `max_bytes / 128`
    /// ([`PayloadLimits::for_bytes`]): besides its counted JSON, each held object costs
    /// about a hundred bytes of bookkeeping (its `Change` and its slot in the list), so
    /// a payload of tiny objects costs at most about twice `max_bytes`, not twenty times.
    pub max_objects: usize,
}

/// The bookkeeping bytes the default object bound allows per object.
const BYTES_PER_OBJECT: usize = 128;

impl PayloadLimits {
    /// At most `max_bytes`, and at most `max_bytes / 128` objects (at least one).
    pub fn for_bytes(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            max_objects: (max_bytes / BYTES_PER_OBJECT).max(1),
        }
    }
}

impl Default for PayloadLimits {
    fn default() -> Self {
        Self::for_bytes(64 << 20)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::PayloadLimits;
    use crate::fdv2::{Action, Error, Event, Protocol, parse_event, parse_poll_with};
    use crate::store::{Kind, Store, Transfer};

    fn ev(name: &str, data: &str) -> Event {
        parse_event(name, &Bytes::copy_from_slice(data.as_bytes())).unwrap()
    }

    fn intent(code: &str) -> Event {
        ev(
            "server-intent",
            &format!(r#"{{"payloads":[{{"id":"p","target":1,"intentCode":"{code}"}}]}}"#),
        )
    }

    /// A `put-object` whose object is `{"key":"<key>","version":1}`: 22 + 2 × key
    /// length counted bytes.
    fn put(key: &str) -> Event {
        ev(
            "put-object",
            &format!(
                r#"{{"version":1,"kind":"flag","key":"{key}","object":{{"key":"{key}","version":1}}}}"#
            ),
        )
    }

    fn delete(key: &str) -> Event {
        ev(
            "delete-object",
            &format!(r#"{{"version":2,"kind":"flag","key":"{key}"}}"#),
        )
    }

    fn transferred(state: &str) -> Event {
        ev(
            "payload-transferred",
            &format!(r#"{{"state":"{state}","version":1}}"#),
        )
    }

    fn limits(max_bytes: usize, max_objects: usize) -> PayloadLimits {
        PayloadLimits {
            max_bytes,
            max_objects,
        }
    }

    #[test]
    fn default_is_the_fdv1_put_limit() {
        let limits = PayloadLimits::default();
        assert_eq!(
            limits.max_bytes,
            crate::sse::Config::default().max_event_len
        );
        assert_eq!(limits.max_objects, limits.max_bytes / 128);
        assert_eq!(crate::config::Limits::default().fdv2_payload, limits);
        assert_eq!(PayloadLimits::for_bytes(1).max_objects, 1);
    }

    #[test]
    fn held_bytes_count_raw_json_and_key() {
        let mut p = Protocol::new();
        p.handle_event(intent("xfer-full")).unwrap();
        p.handle_event(put("ab")).unwrap();
        // {"key":"ab","version":1} is 24 bytes, the key 2.
        assert_eq!(p.builder().held_bytes(), 26);
        p.handle_event(delete("c")).unwrap();
        // {"deleted":true,"key":"c","version":2} is 38 bytes, the key 1.
        assert_eq!(p.builder().held_bytes(), 26 + 39);
        p.handle_event(transferred("s")).unwrap();
        assert_eq!(p.builder().held_bytes(), 0);
    }

    #[test]
    fn full_transfer_past_max_bytes_is_dropped() {
        // Each put counts 24 bytes: two fit in 48, the third goes past.
        let mut p = Protocol::with_limits(limits(48, 100));
        p.handle_event(intent("xfer-full")).unwrap();
        assert_eq!(p.handle_event(put("a")), Ok(Action::Ignore));
        assert_eq!(p.handle_event(put("b")), Ok(Action::Ignore));
        assert_eq!(p.builder().held_bytes(), 48);
        assert_eq!(
            p.handle_event(put("c")),
            Err(Error::PayloadTooLarge { limit: 48 })
        );
        assert!(p.builder().changes().is_empty());
        assert_eq!(p.builder().held_bytes(), 0);
        assert_eq!(
            Error::PayloadTooLarge { limit: 48 }.kind(),
            crate::ErrorKind::InvalidData
        );
        // The message names the limit.
        assert_eq!(
            Error::PayloadTooLarge { limit: 48 }.to_string(),
            "uncommitted fdv2 payload larger than the limit of 48 bytes"
        );
        // A new transfer within the limit completes, with none of the dropped changes.
        let mut store = Store::new();
        p.handle_event(intent("xfer-full")).unwrap();
        p.handle_event(put("d")).unwrap();
        let Ok(Action::Apply(cs)) = p.handle_event(transferred("s2")) else {
            panic!("no change set")
        };
        assert_eq!((cs.transfer, cs.changes.len()), (Transfer::Full, 1));
        store.apply(cs);
        assert!(store.snapshot().get(Kind::Flag, "d").is_some());
        assert!(store.snapshot().get(Kind::Flag, "a").is_none());
    }

    #[test]
    fn objects_past_max_objects_are_dropped() {
        let mut p = Protocol::with_limits(limits(1 << 20, 2));
        p.handle_event(intent("xfer-full")).unwrap();
        p.handle_event(put("a")).unwrap();
        p.handle_event(delete("b")).unwrap();
        assert_eq!(
            p.handle_event(delete("c")),
            Err(Error::TooManyObjects { limit: 2 })
        );
        assert!(p.builder().changes().is_empty());
        assert_eq!(
            Error::TooManyObjects { limit: 2 }.to_string(),
            "uncommitted fdv2 payload of more than the limit of 2 objects"
        );
    }

    #[test]
    fn changes_transfer_is_bounded_too() {
        let mut p = Protocol::with_limits(limits(48, 100));
        p.handle_event(intent("xfer-full")).unwrap();
        assert!(matches!(
            p.handle_event(transferred("s1")),
            Ok(Action::Apply(_))
        ));
        // Later payloads are changes; an endless one is cut off at the limit.
        p.handle_event(put("a")).unwrap();
        p.handle_event(put("b")).unwrap();
        assert_eq!(
            p.handle_event(put("c")),
            Err(Error::PayloadTooLarge { limit: 48 })
        );
        let mut p = Protocol::with_limits(limits(60, 100));
        p.handle_event(intent("xfer-changes")).unwrap();
        let results: Vec<_> = (0..1_000)
            .map(|i| p.handle_event(put(&format!("k{i:03}"))))
            .collect();
        // Two puts of 30 bytes fit in 60; the third fails and drops them with their
        // intent, so nothing more is held until a new `server-intent`.
        assert!(results[..2].iter().all(Result::is_ok));
        assert_eq!(results[2], Err(Error::PayloadTooLarge { limit: 60 }));
        assert!(results[3..].iter().all(|r| *r == Err(Error::MissingIntent)));
        assert!(p.builder().changes().is_empty());
    }

    #[test]
    fn poll_response_past_the_limit_is_invalid_data() {
        let mut events = vec![
            r#"{"event":"server-intent","data":{"payloads":[{"intentCode":"xfer-full"}]}}"#
                .to_owned(),
        ];
        for i in 0..10 {
            events.push(format!(
                r#"{{"event":"put-object","data":{{"version":1,"kind":"flag","key":"f{i}","object":{{"key":"f{i}","version":1}}}}}}"#
            ));
        }
        events
            .push(r#"{"event":"payload-transferred","data":{"state":"s","version":1}}"#.to_owned());
        let body = Bytes::from(format!(r#"{{"events":[{}]}}"#, events.join(",")));
        // 10 objects of 26 bytes.
        let ok = parse_poll_with(&body, limits(260, 10)).unwrap();
        assert_eq!(ok.changes.len(), 10);
        assert_eq!(
            parse_poll_with(&body, limits(259, 10)),
            Err(Error::PayloadTooLarge { limit: 259 })
        );
        assert_eq!(
            parse_poll_with(&body, limits(260, 9)),
            Err(Error::TooManyObjects { limit: 9 })
        );
        assert_eq!(
            crate::fdv2::parse_poll_or_fdv1_with(&body, limits(100, 9)),
            Err(Error::PayloadTooLarge { limit: 100 })
        );
    }

    #[test]
    fn a_cut_off_payload_never_commits_even_if_its_end_follows() {
        let mut p = Protocol::with_limits(PayloadLimits {
            max_bytes: 40,
            max_objects: 10,
        });
        p.handle_event(intent("xfer-full")).unwrap();
        let put = r#"{"version":1,"kind":"flag","key":"f","object":{"key":"f","version":1}}"#;
        p.handle_event(ev("put-object", put)).unwrap();
        assert!(p.handle_event(ev("put-object", put)).is_err());
        // The end of the payload that was cut off: no empty full transfer is committed.
        let transferred = r#"{"state":"s","version":1}"#;
        assert_eq!(
            p.handle_event(ev("payload-transferred", transferred)),
            Err(Error::MissingIntent)
        );
        assert!(p.builder().intent().is_none());
        // A new payload starts with its intent, as after any reconnect.
        p.handle_event(intent("xfer-full")).unwrap();
        p.handle_event(ev("put-object", put)).unwrap();
        let applied = p
            .handle_event(ev("payload-transferred", transferred))
            .unwrap();
        assert!(matches!(applied, Action::Apply(cs) if cs.changes.len() == 1));
    }
}

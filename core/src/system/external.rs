//! [`Mode::External`](crate::Mode::External): the data system without a network
//! source, fed by an in-process one (the SDK's `TestData` and file data source).
//!
//! Why an input and not a source of the core: such a source reads no bytes of a
//! protocol. Its data is already a [`crate::store::ChangeSet`] (built by the SDK from
//! the `TestData` builders or from the files through [`crate::datafile`]), so the core
//! has nothing to parse and no timer to keep; what it owns is what any source's data
//! goes through: the versioned store, the change events, readiness, the status rules,
//! availability and the persistent store's writes. Keeping those here means a client on
//! test data or files behaves as it does on a stream, and the core stays pure: the
//! input carries the data, `now` comes from the caller.

use std::time::Instant;

use super::interface::{Command, Input};
use super::shared::Shared;
use crate::status::{Cause, ErrorInfo, State};
use crate::store::Transfer;

/// Feed one input of an external data system (`stopped`: a stop was handled).
pub(super) fn handle(shared: &mut Shared, now: Instant, input: Input<'_>, stopped: bool) {
    match input {
        Input::Command(Command::Stop) => {
            shared.report(now, State::Off, None);
            shared.set_ready();
        }
        _ if stopped => {}
        Input::SourceData(cs) => {
            let full = cs.transfer == Transfer::Full;
            shared.apply(cs);
            if full || shared.store.initialized() {
                shared.report(now, State::Valid, None);
            }
            if shared.store.initialized() {
                shared.set_ready();
            }
        }
        Input::SourceFailed(failure) => {
            let error = ErrorInfo::new(now, failure.kind, Cause::Source(failure.message));
            shared.report(now, State::Interrupted, Some(error));
        }
        // Nothing to connect, no timer of its own.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use crate::store::{Change, ChangeSet, Kind};
    use crate::{
        Command, Config, DataAvailability, DataSystem, ErrorKind, Event, Input, Mode, Output,
        SourceFailure, State,
    };

    fn drain(system: &mut DataSystem) -> Vec<Event> {
        std::iter::from_fn(|| match system.poll_output() {
            Output::Event(e) => Some(Some(e)),
            Output::Wait(w) => {
                assert_eq!(w, None, "no timer of its own");
                None
            }
            _ => Some(None),
        })
        .flatten()
        .collect()
    }

    fn flag(key: &str, version: u64) -> Change {
        let raw = format!(r#"{{"key":"{key}","version":{version}}}"#);
        Change::from_json(Kind::Flag, Bytes::from(raw)).unwrap()
    }

    #[test]
    fn an_in_process_source_initializes_updates_fails_and_recovers() {
        let now = crate::testing::origin();
        let mut config = Config::new("k");
        config.mode = Mode::External;
        let mut s = DataSystem::new(config, 1, now).unwrap();
        s.handle_input(now, Input::Command(Command::Start));
        assert!(drain(&mut s).is_empty(), "nothing to connect");
        assert_eq!(s.data_availability(), DataAvailability::Defaults);

        let full = ChangeSet::fdv1_full(vec![flag("a", 1), flag("b", 1)]);
        s.handle_input(now, Input::SourceData(full));
        let events = drain(&mut s);
        assert!(matches!(events[0], Event::StoreChanged { .. }));
        assert!(matches!(&events[1], Event::StatusChanged(st) if st.state == State::Valid));
        assert_eq!(events[2], Event::Ready);
        assert_eq!(s.data_availability(), DataAvailability::Refreshed);

        s.handle_input(now, Input::SourceData(ChangeSet::fdv1_upsert(flag("a", 2))));
        let events = drain(&mut s);
        let Event::StoreChanged { changed_flags } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(changed_flags.clone().into_keys(), ["a"]);

        let failure = SourceFailure {
            kind: ErrorKind::InvalidData,
            message: "bad file".into(),
        };
        s.handle_input(now, Input::SourceFailed(failure));
        assert_eq!(s.status().state, State::Interrupted);
        assert_eq!(
            s.status().error.as_ref().unwrap().kind,
            ErrorKind::InvalidData
        );
        assert_eq!(s.snapshot().get(Kind::Flag, "a").unwrap().version, 2);
        drain(&mut s);

        let again = ChangeSet::fdv1_full(vec![flag("a", 2), flag("b", 2)]);
        s.handle_input(now, Input::SourceData(again));
        assert_eq!(s.status().state, State::Valid);
        let events = drain(&mut s);
        let Event::StoreChanged { changed_flags } = &events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(changed_flags.clone().into_keys(), ["b"], "versions tell");

        s.handle_input(now, Input::Command(Command::Stop));
        assert_eq!(s.status().state, State::Off);
        s.handle_input(now, Input::SourceData(ChangeSet::fdv1_upsert(flag("a", 9))));
        assert_eq!(s.snapshot().get(Kind::Flag, "a").unwrap().version, 2);
    }
}

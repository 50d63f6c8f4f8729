//! The all-flags state: every flag evaluated for one context, in the JSON shape
//! LaunchDarkly's client-side SDKs bootstrap from (an SDK's `all_flags_state`).

use std::cell::RefCell;
use std::collections::BTreeMap;

use flagsync_core::bigseg::BigSegmentLookup;
use flagsync_core::{Kind, Snapshot};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::engine::{self, Flag, Options, PrerequisiteEvent, PrerequisiteRecorder, Store};
use crate::models::Models;
use crate::{Context, EvalError, FlagValue, Reason};

/// What an SDK's `all_flags_state` includes. The default: every flag, no reasons,
/// versions for every flag.
///
/// ```
/// use flagsync_eval::AllFlagsOptions;
///
/// let options = AllFlagsOptions::new().client_side_only(true).with_reasons(true);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct AllFlagsOptions {
    client_side_only: bool,
    mobile_only: bool,
    with_reasons: bool,
    details_only_for_tracked_flags: bool,
}

impl AllFlagsOptions {
    /// The default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only flags available to client-side (JavaScript) SDKs, i.e. with
    /// `clientSideAvailability.usingEnvironmentId` (or the older `clientSide`).
    pub fn client_side_only(mut self, on: bool) -> Self {
        self.client_side_only = on;
        self
    }

    /// Only flags available to mobile SDKs (`clientSideAvailability.usingMobileKey`,
    /// true unless a flag says otherwise). With [`AllFlagsOptions::client_side_only`]
    /// too, a flag available to either is kept (the official SDK's
    /// `FlagFilter::CLIENT | FlagFilter::MOBILE`).
    pub fn mobile_only(mut self, on: bool) -> Self {
        self.mobile_only = on;
        self
    }

    /// Whether `flag` passes the client-side and mobile filters.
    fn keeps(&self, flag: &Flag) -> bool {
        match (self.client_side_only, self.mobile_only) {
            (false, false) => true,
            (true, false) => flag.using_environment_id(),
            (false, true) => flag.using_mobile_key(),
            (true, true) => flag.using_environment_id() || flag.using_mobile_key(),
        }
    }

    /// Include each flag's evaluation reason.
    pub fn with_reasons(mut self, on: bool) -> Self {
        self.with_reasons = on;
        self
    }

    /// Omit versions and reasons (which only serve analytics events) unless the flag
    /// tracks events, is in an experiment, or is being debugged.
    pub fn details_only_for_tracked_flags(mut self, on: bool) -> Self {
        self.details_only_for_tracked_flags = on;
        self
    }
}

/// One flag's entry in an [`AllFlagsState`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlagState {
    /// The flag's value for the context (`None`: the flag is off without an off
    /// variation, or it could not be evaluated).
    pub value: Option<FlagValue>,
    /// The index of the variation served (`None` when there is no value).
    pub variation: Option<isize>,
    /// The flag's version (omitted by `details_only_for_tracked_flags`).
    pub version: Option<u64>,
    /// Why this value (with `with_reasons`, or when an experiment needs it).
    pub reason: Option<Reason>,
    /// Full events are wanted for this flag.
    pub track_events: bool,
    /// The reason must be kept in events (experiments).
    pub track_reason: bool,
    /// Debug events until this Unix time in milliseconds.
    pub debug_events_until_date: Option<u64>,
    /// The keys of this flag's own prerequisites that its evaluation reached, in order:
    /// every one up to the first that failed, including a missing prerequisite flag or
    /// one whose evaluation failed.
    pub prerequisites: Vec<String>,
}

/// Every flag evaluated for one context: made by an SDK's `all_flags_state`.
///
/// Its JSON (`Serialize`, or [`AllFlagsState::to_json`]) is the bootstrap format of
/// LaunchDarkly's client-side SDKs: each flag key with its value, then `$flagsState`
/// with each flag's metadata and `$valid`.
///
/// With flagsync's client: `client.all_flags_state(&context, options).to_json()` gives
/// `{"flag-a":true,…,"$flagsState":{…},"$valid":true}`. Before an SDK has data:
///
/// ```
/// let state = flagsync_eval::AllFlagsState::invalid();
/// assert_eq!(state.to_json(), r#"{"$flagsState":{},"$valid":false}"#);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AllFlagsState {
    valid: bool,
    flags: BTreeMap<String, FlagState>,
}

impl AllFlagsState {
    /// The state of an SDK that has no data yet: no flags, not [valid](Self::valid).
    pub fn invalid() -> Self {
        Self {
            valid: false,
            flags: BTreeMap::new(),
        }
    }

    /// False when the client had no data: the state is then empty.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The value of flag `key`, if it is in the state and has one.
    pub fn value(&self, key: &str) -> Option<&FlagValue> {
        self.flags.get(key)?.value.as_ref()
    }

    /// The entry of flag `key`.
    pub fn flag(&self, key: &str) -> Option<&FlagState> {
        self.flags.get(key)
    }

    /// Every entry, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &FlagState)> + '_ {
        self.flags.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of flags in the state.
    pub fn len(&self) -> usize {
        self.flags.len()
    }

    /// True when no flag is in the state.
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    /// The state as bootstrap JSON (keys sorted).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for AllFlagsState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.flags.len() + 2))?;
        for (key, state) in &self.flags {
            map.serialize_entry(key, &state.value)?;
        }
        map.serialize_entry("$flagsState", &Metadata(&self.flags))?;
        map.serialize_entry("$valid", &self.valid)?;
        map.end()
    }
}

/// `$flagsState`: each flag's metadata.
struct Metadata<'a>(&'a BTreeMap<String, FlagState>);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, state) in self.0 {
            map.serialize_entry(key, &FlagMetadata(state))?;
        }
        map.end()
    }
}

struct FlagMetadata<'a>(&'a FlagState);

impl Serialize for FlagMetadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = self.0;
        let mut map = serializer.serialize_map(None)?;
        if let Some(v) = s.variation {
            map.serialize_entry("variation", &v)?;
        }
        if let Some(v) = s.version {
            map.serialize_entry("version", &v)?;
        }
        if let Some(r) = &s.reason {
            map.serialize_entry("reason", r)?;
        }
        if s.track_events {
            map.serialize_entry("trackEvents", &true)?;
        }
        if s.track_reason {
            map.serialize_entry("trackReason", &true)?;
        }
        if let Some(d) = s.debug_events_until_date {
            map.serialize_entry("debugEventsUntilDate", &d)?;
        }
        if !s.prerequisites.is_empty() {
            map.serialize_entry("prerequisites", &s.prerequisites)?;
        }
        map.end()
    }
}

/// The keys of one flag's own (top-level) prerequisites that its evaluation reached,
/// in order: every one up to the first that failed, including a missing prerequisite
/// flag or one whose evaluation failed. As in Python's `_check_prerequisites`
/// (ldclient/impl/evaluator.py), the flag itself as its own prerequisite is not listed
/// (the engine does not report it).
struct PrerequisiteLog<'a> {
    flag: &'a str,
    keys: RefCell<Vec<String>>,
}

impl PrerequisiteRecorder for PrerequisiteLog<'_> {
    fn record(&self, _: &PrerequisiteEvent<'_>) {}

    fn reached(&self, flag_key: &str, prerequisite_key: &str) {
        if flag_key == self.flag {
            self.keys.borrow_mut().push(prerequisite_key.to_owned());
        }
    }
}

/// Every flag of `snapshot` evaluated for `context` with the models of `models`
/// (prerequisites and segments read from `store`), at Unix time `now_ms` (for
/// `debugEventsUntilDate`).
///
/// A flag that cannot be parsed, or whose evaluation fails, is included with no value,
/// no variation and the reason `ERROR` (`MALFORMED_FLAG`); an unparsable flag is left
/// out with `client_side_only` or `mobile_only`, which need the parsed flag to decide.
pub fn flags_state(
    snapshot: &Snapshot,
    models: &(impl Models + ?Sized),
    store: &dyn Store,
    big_segments: Option<&dyn BigSegmentLookup>,
    context: &Context,
    options: AllFlagsOptions,
    now_ms: u64,
) -> AllFlagsState {
    // Collected, then sorted and built in bulk (cheaper than one insertion per flag).
    let mut flags = Vec::new();
    for (key, item, derived) in snapshot.iter_with_derived(Kind::Flag) {
        let Some(flag) = models.flag(snapshot, key, item, derived) else {
            if !options.client_side_only && !options.mobile_only {
                let reason = Reason::error(EvalError::MalformedFlag);
                let state = FlagState {
                    value: None,
                    variation: None,
                    version: Some(item.version),
                    reason: options.with_reasons.then_some(reason),
                    track_events: false,
                    track_reason: false,
                    debug_events_until_date: None,
                    prerequisites: Vec::new(),
                };
                flags.push((key.to_owned(), state));
            }
            continue;
        };
        if !options.keeps(&flag) {
            continue;
        }
        let log = PrerequisiteLog {
            flag: key,
            keys: RefCell::new(Vec::new()),
        };
        let eval_options = Options {
            recorder: Some(&log),
            big_segments,
        };
        let detail = engine::evaluate(store, &flag, context, eval_options);
        let failed = detail.reason.is_error();
        // As the analytics events do: an experiment needs the full event and reason.
        let experiment = flag.is_experimentation_enabled(&detail.reason);
        let track_events = flag.track_events || experiment;
        let debugging = flag.debug_events_until_date.is_some_and(|t| t > now_ms);
        let details =
            !options.details_only_for_tracked_flags || track_events || experiment || debugging;
        let state = FlagState {
            value: detail.value.filter(|_| !failed).cloned(),
            variation: detail.variation_index.filter(|_| !failed),
            version: details.then_some(flag.version),
            reason: (details && (options.with_reasons || experiment)).then_some(detail.reason),
            track_events,
            track_reason: experiment,
            debug_events_until_date: flag.debug_events_until_date,
            prerequisites: log.keys.into_inner(),
        };
        flags.push((key.to_owned(), state));
    }
    AllFlagsState {
        valid: true,
        flags: flags.into_iter().collect(),
    }
}

//! The FDv2 coordinator (PROTOCOL.md B §5.7, §5.10, A.4.6): initializers in order until
//! one yields a selector, then one synchronizer at a time with fallback, recovery,
//! removal and the directed, terminal FDv1 fallback. Every timing rule is computed from
//! `now`; the reference's threads and timers become one deadline.
//!
//! # Retry timing across synchronizer restarts
//!
//! What the reference does. LaunchDarkly's Python SDK (the FDv2 reference, 9.20:
//! `ldclient/impl/datasystem/fdv2.py`, `impl/datasourcev2/streaming.py` and
//! `polling.py`) runs a synchronizer under a condition timer that fires 10 s after the
//! synchronizer's start and every 10 s after (`_consume_synchronizer_results`). When
//! the fallback condition holds (INITIALIZING for more than 10 s, INTERRUPTED for more
//! than a minute) or the recovery one (the same, or VALID for 5 minutes on the
//! secondary), it stops the synchronizer and builds the next one from its builder: the
//! other one, or the same again when it is alone. Each build starts from nothing: the
//! streaming synchronizer's `sync()` makes a new SSE client (`create_sse_client`:
//! first retry 1 s, doubling to 30 s, jitter 0.5, reset after a healthy minute) that
//! connects at once, and the polling synchronizer's `sync()` polls at once, then every
//! interval. Under a long outage the backoff therefore starts again at every restart,
//! 10 or 20 s apart, each restart with an immediate request: in issue 42's minute of
//! `503` Python 9.20 sent 17 stream requests (`default`: 14), and flagsync, which did
//! the same, 25 (16).
//!
//! What flagsync does instead, never making more requests than that: the coordinator
//! keeps a synchronizer's [`RetryState`] (its backoff streak, and the retry or poll it
//! had scheduled; a poll still in flight counts as made) when it stops it for a
//! fallback or a recovery, and hands it to the next instance of the same source. That
//! instance's first attempt waits for the pending one (never later than the previous
//! instance would have made it), and its next failure waits the next longer delay, as
//! if the synchronizer had never been restarted; the streak ends only on success (a
//! healthy minute, or a poll that succeeds). Only a synchronizer the coordinator
//! stopped hands anything on: an initializer polls once, at once, and hands nothing to
//! the synchronizers after it; a synchronizer removed for good, or left for the
//! directed FDv1 fallback, drops its state. Which synchronizer runs, and the checks
//! every 10 s, are the reference's. Under `503` in virtual time
//! (`conformance/scenarios/fdv2_outage_*`), the stream alone makes 7 requests in the
//! first minute and 10 in two (25 and 53 before), the `default` preset 10 and 13 (17
//! and 35 before: a polling initializer, then stream and polling taking turns every
//! 10 s).
//!
//! # Checks keep their grid
//!
//! A synchronizer started by a check has its turn counted from the check's due time,
//! not from the moment the check ran: its checks stay on the 10 s grid and its A.4.6
//! age counts from there. In virtual time the two are the same. On a real runtime a
//! timer wakes a little late, and counting from the late wake-up moved every later
//! check by the lateness, while a carried poll stayed on its own 30 s grid: the poll
//! then fell due a fraction of a millisecond before the check that restarted its
//! synchronizer, started, and was cut off by that check, its answer lost and the next
//! poll a whole interval away (the live scenario
//! `fdv2_polling_invalid_payload_is_invalid_data`, whose second poll was then never
//! made or never applied, mostly on smol and async-std; in the `default` preset, polls
//! cut off at the end of polling's turns, one more than in virtual time every two
//! minutes). On the grid, a poll due with a check is due at the same instant or after
//! it, and the check, which runs first, decides as it does in virtual time (tested with
//! late timers: `Harness::timer_lateness`).

use std::time::Instant;

use super::sources::{AnySource, Factory, Role};
use super::{Command, Input, Output, Shared};
use crate::backoff::RetryState;
use crate::config::{Fdv2Config, SourceSpec};
use crate::io::Action;
use crate::source::SourceOutput;
use crate::status::{ErrorInfo, State};

/// What the coordinator does after a synchronizer's outputs (PROTOCOL.md B §5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Directive {
    /// Restart at the first synchronizer.
    Recover,
    /// Move to the next synchronizer (wrapping).
    Fallback,
    /// Drop the current synchronizer for good.
    Remove,
    /// Replace everything with the FDv1 fallback, for good.
    Fdv1,
}

#[derive(Debug)]
enum Phase {
    /// Not started.
    Idle,
    /// Running `initializers[index]`.
    Initializing { index: usize },
    /// Running `synchronizers[index]`; the next condition check is due at `check_at`.
    Synchronizing { index: usize, check_at: Instant },
    /// Stopped, exhausted or halted: nothing runs again.
    Done,
}

#[derive(Debug)]
struct Active {
    spec: SourceSpec,
    source: AnySource,
    /// When its turn began: its start, or the due time of the check that started it.
    started: Instant,
}

/// The FDv2 coordinator.
#[derive(Debug)]
pub(crate) struct Coordinator {
    factory: Factory,
    fdv2: Fdv2Config,
    /// The working list: synchronizers removed for good are gone from it.
    synchronizers: Vec<SourceSpec>,
    phase: Phase,
    active: Option<Active>,
    /// The server directed FDv1 fallback (terminal).
    fdv1: bool,
    /// An environment id seen on a response, recorded once its data is VALID.
    pending_env: Option<String>,
    /// The retry timing of each synchronizer stopped for a fallback or a recovery, for
    /// its next instance (one entry per distinct source, so bounded by the settings).
    retry: Vec<(SourceSpec, RetryState)>,
}

impl Coordinator {
    pub(crate) fn new(factory: Factory) -> Self {
        let fdv2 = factory.config().fdv2.clone();
        Self {
            synchronizers: fdv2.synchronizers.clone(),
            fdv2,
            factory,
            phase: Phase::Idle,
            active: None,
            fdv1: false,
            pending_env: None,
            retry: Vec::new(),
        }
    }

    /// Daemon mode: nothing to run.
    pub(crate) fn has_no_sources(&self) -> bool {
        self.fdv2.has_no_sources()
    }

    pub(crate) fn active_name(&self) -> Option<&'static str> {
        self.active.as_ref().map(|a| a.spec.name())
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let source = self.active.as_ref().and_then(|a| a.source.poll_timeout());
        match self.phase {
            Phase::Synchronizing { check_at, .. } => {
                Some(source.map_or(check_at, |s| s.min(check_at)))
            }
            _ => source,
        }
    }

    pub(crate) fn handle_input(&mut self, now: Instant, input: Input<'_>, shared: &mut Shared) {
        match input {
            Input::Command(Command::Start) => {
                if matches!(self.phase, Phase::Idle) {
                    self.start(now, shared);
                }
                return;
            }
            Input::Command(Command::Stop) => return self.halt(now, shared),
            Input::StoreFailed
            | Input::StoreFault(_)
            | Input::StoreAvailable(_)
            | Input::StoreInitialized
            | Input::SourceData(_)
            | Input::SourceFailed(_) => return,
            _ => {}
        }
        let timeout = matches!(input, Input::Timeout);
        if timeout {
            // A check due now runs before the source's own timers: a synchronizer about
            // to be replaced does not start a poll or a reconnect first.
            self.check(now, shared);
        }
        if let Some(active) = self.active.as_mut() {
            let s = &mut active.source;
            match input {
                Input::Connected { conn } => s.handle_connected(now, conn),
                Input::Data { conn, bytes } => {
                    s.handle_data(now, conn, bytes, shared.store.data());
                }
                Input::Closed { conn, cause } => s.handle_closed(now, conn, cause),
                Input::Timeout => s.handle_timeout(now),
                Input::Command(_)
                | Input::StoreFailed
                | Input::StoreFault(_)
                | Input::StoreAvailable(_)
                | Input::StoreInitialized
                | Input::SourceData(_)
                | Input::SourceFailed(_) => {}
            }
        }
        self.pump(now, shared);
        if !timeout {
            // Checks are due on their grid whatever input brings the time past them;
            // I/O that arrives at the same moment counts first.
            self.check(now, shared);
        }
    }

    fn start(&mut self, now: Instant, shared: &mut Shared) {
        if self.fdv2.has_no_sources() {
            // Daemon mode: the store is whatever another process keeps current.
            self.phase = Phase::Done;
            shared.set_ready();
        } else if self.fdv2.initializers.is_empty() {
            self.start_synchronizer(now, now, 0, shared);
        } else {
            self.start_initializer(now, 0, shared);
        }
    }

    fn start_initializer(&mut self, now: Instant, index: usize, shared: &mut Shared) {
        let Some(spec) = self.fdv2.initializers.get(index).cloned() else {
            return self.start_synchronizer(now, now, 0, shared);
        };
        self.phase = Phase::Initializing { index };
        self.launch(now, now, spec, Role::Initializer, shared);
    }

    /// Start `synchronizers[index]` at `now`, its turn counted from `turn`: `now`, or
    /// the due time of the check that started it (see "Checks keep their grid" in the
    /// module documentation).
    fn start_synchronizer(
        &mut self,
        now: Instant,
        turn: Instant,
        index: usize,
        shared: &mut Shared,
    ) {
        if self.fdv1 {
            // Directed fallback is terminal: only the FDv1 synchronizer runs from now on.
            match &self.fdv2.fdv1_fallback {
                Some(spec) => self.synchronizers = vec![spec.clone()],
                None => return self.halt(now, shared),
            }
        }
        let Some(spec) = self.synchronizers.get(index).cloned() else {
            return self.halt(now, shared);
        };
        self.phase = Phase::Synchronizing {
            index,
            // `turn + check_interval`, unless the check ran that late.
            check_at: super::next_on_grid(turn, self.fdv2.timing.check_interval, now),
        };
        tracing::debug!(
            synchronizer = spec.name(),
            index,
            "fdv2: starting synchronizer"
        );
        self.launch(now, turn, spec, Role::Synchronizer, shared);
    }

    fn launch(
        &mut self,
        now: Instant,
        turn: Instant,
        spec: SourceSpec,
        role: Role,
        shared: &mut Shared,
    ) {
        match self.factory.build(&spec, role) {
            Ok(mut source) => {
                source.set_basis(shared.store.selector());
                if role == Role::Synchronizer
                    && let Some(i) = self.retry.iter().position(|(s, _)| *s == spec)
                {
                    source.resume(self.retry.swap_remove(i).1);
                }
                source.handle_start(now);
                self.active = Some(Active {
                    spec,
                    source,
                    started: turn,
                });
                self.pump(now, shared);
            }
            Err(e) => {
                // Settings are validated up front, so this cannot happen; if it did, the
                // source would count as failed for good (PROTOCOL.md A.4.6).
                tracing::warn!(error = %e, "fdv2: a source could not be built");
                match self.phase {
                    Phase::Initializing { index } => self.start_initializer(now, index + 1, shared),
                    Phase::Synchronizing { .. } => {
                        self.act(now, now, Directive::Remove, None, shared)
                    }
                    _ => {}
                }
            }
        }
    }

    /// Drain the active source's outputs and act on them.
    fn pump(&mut self, now: Instant, shared: &mut Shared) {
        match self.phase {
            Phase::Initializing { index } => self.pump_initializer(now, index, shared),
            Phase::Synchronizing { .. } => self.pump_synchronizer(now, shared),
            Phase::Idle | Phase::Done => {}
        }
    }

    fn pump_initializer(&mut self, now: Instant, index: usize, shared: &mut Shared) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        let mut finished = false;
        let mut selector_defined = false;
        let mut failure = None;
        while let Some(o) = active.source.poll_output() {
            match o {
                SourceOutput::Action(a) => shared.out.push_back(Output::Action(a)),
                SourceOutput::EnvironmentId(id) => self.pending_env = Some(id),
                SourceOutput::Apply(cs) => {
                    selector_defined = cs.selector.as_ref().is_some_and(|s| s.is_defined());
                    shared.apply(cs);
                }
                SourceOutput::Status(State::Valid, _) => finished = true,
                SourceOutput::Status(_, error) => {
                    finished = true;
                    failure = Some(error);
                }
                SourceOutput::FallbackToFdv1 => self.fdv1 = true,
            }
        }
        if !finished {
            return;
        }
        self.stop_active(now, shared);
        match failure {
            None => {
                // PROTOCOL.md B §5.7 initializer phase, step 3.
                if let Some(env) = self.pending_env.take() {
                    shared.set_environment_id(env);
                }
                if selector_defined {
                    shared.set_ready();
                }
            }
            Some(error) => {
                // The initializer phase reports no status (status stays INITIALIZING),
                // but the error is kept for the user to see.
                tracing::debug!(index, "fdv2: initializer failed");
                let state = if self.fdv1 && self.fdv2.fdv1_fallback.is_none() {
                    State::Off
                } else {
                    State::Interrupted
                };
                if error.is_some() {
                    shared.report(now, state, error);
                }
            }
        }
        if self.fdv1 || selector_defined {
            self.start_synchronizer(now, now, 0, shared);
        } else {
            self.start_initializer(now, index + 1, shared);
        }
    }

    fn pump_synchronizer(&mut self, now: Instant, shared: &mut Shared) {
        let Some(active) = self.active.as_mut() else {
            return;
        };
        let mut directive = None;
        let mut last_error = None;
        while let Some(o) = active.source.poll_output() {
            match o {
                SourceOutput::Action(a) => shared.out.push_back(Output::Action(a)),
                SourceOutput::EnvironmentId(id) => self.pending_env = Some(id),
                SourceOutput::Apply(cs) => {
                    shared.apply(cs);
                    active.source.set_basis(shared.store.selector());
                }
                SourceOutput::Status(State::Valid, _) => {
                    if let Some(env) = self.pending_env.take() {
                        shared.set_environment_id(env);
                    }
                    shared.report(now, State::Valid, None);
                    shared.set_ready();
                }
                SourceOutput::Status(State::Off, error) => {
                    // The synchronizer gave up for good: it is removed. Whether the data
                    // system is OFF depends on what is left (see `act`).
                    directive = directive.max(Some(Directive::Remove));
                    last_error = error;
                }
                // After a fallback directive the failure is reported with the switch
                // (see `act`).
                SourceOutput::Status(_, error) if directive == Some(Directive::Fdv1) => {
                    last_error = error;
                }
                SourceOutput::Status(state, error) => shared.report(now, state, error),
                SourceOutput::FallbackToFdv1 => directive = Some(Directive::Fdv1),
            }
        }
        if let Some(d) = directive {
            self.act(now, now, d, last_error, shared);
        }
    }

    /// The periodic fallback and recovery check (PROTOCOL.md B §5.7), on the
    /// `check_interval` grid from the synchronizer's start.
    fn check(&mut self, now: Instant, shared: &mut Shared) {
        let Phase::Synchronizing { index, check_at } = &mut self.phase else {
            return;
        };
        if now < *check_at {
            return;
        }
        let due = *check_at;
        *check_at = super::next_on_grid(due, self.fdv2.timing.check_interval, now);
        let index = *index;
        let Some(active) = &self.active else { return };
        let status = shared.status.status();
        // A.4.6: durations count from the later of the last state change and this
        // synchronizer's start, so a state inherited from the previous synchronizer
        // does not count against this one.
        let age = now.saturating_duration_since(status.since.max(active.started));
        let t = self.fdv2.timing;
        let directive = match status.state {
            State::Valid if index != 0 && age >= t.recovery => Some(Directive::Recover),
            State::Interrupted if age >= t.interrupted_fallback => Some(Directive::Fallback),
            State::Initializing if age >= t.initializing_fallback => Some(Directive::Fallback),
            _ => None,
        };
        if let Some(d) = directive {
            tracing::debug!(?d, state = ?status.state, ?age, "fdv2: condition met");
            // The next turn counts from when this check was due, not from `now`.
            self.act(now, due, d, None, shared);
        }
    }

    /// Carry out `d` at `now`; a synchronizer it starts has its turn counted from
    /// `turn` (see [`Coordinator::start_synchronizer`]).
    fn act(
        &mut self,
        now: Instant,
        turn: Instant,
        d: Directive,
        error: Option<ErrorInfo>,
        shared: &mut Shared,
    ) {
        let Phase::Synchronizing { index, .. } = self.phase else {
            return;
        };
        if let Some(active) = &self.active
            && matches!(d, Directive::Fallback | Directive::Recover)
        {
            // The next instance of this source goes on from its retry timing.
            let state = active.source.retry_state(now);
            let spec = active.spec.clone();
            self.retry.retain(|(s, _)| *s != spec);
            self.retry.push((spec, state));
        }
        self.stop_active(now, shared);
        let next = match d {
            Directive::Fdv1 => {
                self.fdv1 = true;
                self.retry.clear();
                if self.fdv2.fdv1_fallback.is_none() {
                    // Halted: the error goes with the OFF (PROTOCOL.md B §5.7).
                    shared.report(now, State::Off, error);
                    return self.halt(now, shared);
                }
                if let Some(e) = error {
                    shared.report(now, State::Interrupted, Some(e));
                }
                0
            }
            Directive::Remove => {
                if index < self.synchronizers.len() {
                    let spec = self.synchronizers.remove(index);
                    if !self.synchronizers.contains(&spec) {
                        self.retry.retain(|(s, _)| *s != spec);
                    }
                }
                if self.synchronizers.is_empty() {
                    shared.report(now, State::Off, error);
                    return self.halt(now, shared);
                }
                // Another synchronizer takes over: the data system is interrupted, not
                // off (OFF means nothing will run again).
                shared.report(now, State::Interrupted, error);
                if index >= self.synchronizers.len() {
                    0
                } else {
                    index
                }
            }
            Directive::Recover => 0,
            Directive::Fallback => (index + 1) % self.synchronizers.len().max(1),
        };
        self.start_synchronizer(now, turn, next, shared);
    }

    /// Nothing more will run: OFF (the last error kept), and waiting can end.
    fn halt(&mut self, now: Instant, shared: &mut Shared) {
        self.stop_active(now, shared);
        self.phase = Phase::Done;
        shared.report(now, State::Off, None);
        shared.set_ready();
    }

    /// Stop the active source and forward its close actions; its other outputs are
    /// dropped.
    fn stop_active(&mut self, now: Instant, shared: &mut Shared) {
        if let Some(mut active) = self.active.take() {
            active.source.handle_stop(now);
            while let Some(o) = active.source.poll_output() {
                if let SourceOutput::Action(a @ Action::Close { .. }) = o {
                    shared.out.push_back(Output::Action(a));
                }
            }
        }
    }
}

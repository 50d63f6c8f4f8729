//! THE drive loop, written once against `Arc<dyn Runtime>` (DESIGN.md §4, STYLE.md §1.1).
//!
//! One task owns the state machine. Connection tasks and the application talk to it
//! through a single inbox; it feeds every message to the machine with `now`, drains the
//! outputs until `Wait`, performs the actions (spawning or cancelling connection tasks),
//! publishes the events, then sleeps until the deadline or the next message.
//! Whether a deadline has passed is decided by comparing `runtime.now()` with it, not by
//! trusting the timer future (a busy runtime may keep an elapsed timer pending).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use flagsync_core::source::{EventStream, StreamOutput};
use flagsync_core::{Action, CloseCause, ConnId, DataSystem, Persist};

use crate::conn::{self, ConnConfig};
use crate::runtime::{Runtime, race};

pub(crate) use crate::inbox::{Finished, Msg, SourceReport, StoreReport, TaskGuard};

/// An input for a [`Machine`].
#[derive(Debug)]
pub(crate) enum In<'a, C> {
    Command(C),
    Connected(ConnId),
    Data(ConnId, &'a [u8]),
    Closed(ConnId, CloseCause),
    Timeout,
    Store(StoreReport),
    Source(SourceReport),
}

/// An output of a [`Machine`].
#[derive(Debug)]
pub(crate) enum Out<E> {
    Action(Action),
    Event(E),
    /// A request for the persistent store, handed to the sink in order.
    Persist(Persist),
    Wait(Option<Instant>),
}

/// A sans-I/O machine the driver can run: the data system, or a bare event stream.
pub(crate) trait Machine: Send + 'static {
    type Command: Send + 'static;
    type Event;
    fn handle(&mut self, now: Instant, input: In<'_, Self::Command>);
    /// The next output; `Wait` once drained.
    fn poll(&mut self) -> Out<Self::Event>;
    /// Stop for good (closing connections through `Close` actions).
    fn stop(&mut self, now: Instant);
}

/// Where a machine's events go.
pub(crate) trait Sink<M: Machine>: Send + 'static {
    fn publish(&mut self, machine: &M, event: M::Event);
    /// Perform a persistent-store request (in the order given) and report back
    /// through the inbox; without a store it is dropped.
    fn persist(&mut self, _request: Persist) {
        // Not `?request`: an init holds the whole data set.
        tracing::debug!("no persistent store: request dropped");
    }
    /// `bytes` arrived on a connection (before the machine sees them).
    fn received(&mut self, _bytes: usize) {}
    /// Connection `conn` is being opened to send `request`.
    fn connecting(&mut self, _conn: ConnId, _request: &[u8]) {}
    /// `bytes` arrived on `conn` (before the machine sees them).
    fn data(&mut self, _conn: ConnId, _bytes: &[u8]) {}
    /// Connection `conn` ended or was closed.
    fn closed(&mut self, _conn: ConnId) {}
    /// The round is over: its inputs (one, or several that were already waiting, see
    /// [`run`]) are handled and every output is drained. A sink may hold what the
    /// round's events publish until here, to publish it once per round.
    fn drained(&mut self, _machine: &M) {}
    /// The driver ended.
    fn finish(&mut self, _machine: &M) {}
}

impl Machine for DataSystem {
    type Command = flagsync_core::Command;
    type Event = flagsync_core::Event;

    fn handle(&mut self, now: Instant, input: In<'_, Self::Command>) {
        use flagsync_core::Input;
        self.handle_input(
            now,
            match input {
                In::Command(c) => Input::Command(c),
                In::Connected(conn) => Input::Connected { conn },
                In::Data(conn, bytes) => Input::Data { conn, bytes },
                In::Closed(conn, cause) => Input::Closed { conn, cause },
                In::Timeout => Input::Timeout,
                In::Store(StoreReport::Failed(fault)) => Input::StoreFault(fault),
                In::Store(StoreReport::Available(available)) => Input::StoreAvailable(available),
                In::Store(StoreReport::Initialized) => Input::StoreInitialized,
                In::Source(SourceReport::Data(cs)) => Input::SourceData(cs),
                In::Source(SourceReport::Failed(f)) => Input::SourceFailed(f),
            },
        );
    }

    fn poll(&mut self) -> Out<Self::Event> {
        match self.poll_output() {
            flagsync_core::Output::Action(a) => Out::Action(a),
            flagsync_core::Output::Event(e) => Out::Event(e),
            flagsync_core::Output::Persist(p) => Out::Persist(p),
            flagsync_core::Output::Wait(w) => Out::Wait(w),
        }
    }

    fn stop(&mut self, now: Instant) {
        self.handle_input(
            now,
            flagsync_core::Input::Command(flagsync_core::Command::Stop),
        );
    }
}

/// Commands of a bare [`EventStream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamCommand {
    Start,
    Restart,
}

impl Machine for EventStream {
    type Command = StreamCommand;
    type Event = StreamOutput;

    fn handle(&mut self, now: Instant, input: In<'_, Self::Command>) {
        match input {
            In::Command(StreamCommand::Start) => self.handle_start(now),
            In::Command(StreamCommand::Restart) => self.handle_restart(now),
            In::Connected(conn) => self.handle_connected(now, conn),
            In::Data(conn, bytes) => self.handle_data(now, conn, bytes),
            In::Closed(conn, cause) => self.handle_closed(now, conn, cause),
            In::Timeout => self.handle_timeout(now),
            // A bare stream has no persistent store, nor an in-process source.
            In::Store(_) | In::Source(_) => {}
        }
    }

    fn poll(&mut self) -> Out<Self::Event> {
        match self.poll_output() {
            Some(StreamOutput::Action(a)) => Out::Action(a),
            Some(other) => Out::Event(other),
            None => Out::Wait(self.poll_timeout()),
        }
    }

    fn stop(&mut self, _now: Instant) {
        self.handle_stop();
    }
}

/// At most this many more inbox messages join a round before the sink is told the
/// outputs are drained ([`Sink::drained`], where the data system publishes its
/// snapshot): with reads of up to 64 KiB, 192 KiB of a burst per round. The items a
/// round replaces, and the map nodes it copies, stay alive until its snapshot is
/// published, so a round's size is memory a patch flood needs beyond the store; 16
/// (1 MiB rounds) published less often at no gain in rate, and held 1 MB more.
pub(crate) const MAX_BATCH: usize = 2;

/// Run `machine` until [`Msg::Shutdown`]. `tx` is a sender of `inbox`, handed to
/// connection tasks.
///
/// After each input the machine's outputs are drained (actions performed, events handed
/// to the sink at once); messages already waiting in the inbox are then handled in the
/// same round, up to [`MAX_BATCH`], and [`Sink::drained`] is called once at the end of
/// the round, before the driver waits again.
pub(crate) async fn run<M: Machine, S: Sink<M>>(
    rt: Arc<dyn Runtime>,
    conn_config: Arc<ConnConfig>,
    mut machine: M,
    mut sink: S,
    tx: async_channel::Sender<Msg<M::Command>>,
    inbox: async_channel::Receiver<Msg<M::Command>>,
    guard: Arc<TaskGuard>,
) {
    // Dropping a connection's cancel sender ends its task, which drops its socket.
    let mut conns: HashMap<ConnId, async_channel::Sender<()>> = HashMap::new();
    let mut timer: Option<(Instant, crate::runtime::BoxFuture<'static, ()>)> = None;
    let mut shutting_down = false;
    // Inputs handled since the sink was last told the outputs are drained.
    let mut batched = 0usize;
    loop {
        let wait = loop {
            match machine.poll() {
                Out::Action(Action::Connect {
                    conn,
                    endpoint,
                    request,
                }) => {
                    if shutting_down {
                        continue;
                    }
                    sink.connecting(conn, &request);
                    let (cancel_tx, cancel_rx) = async_channel::bounded(1);
                    conns.insert(conn, cancel_tx);
                    rt.spawn(Box::pin(conn::run(
                        rt.clone(),
                        conn_config.clone(),
                        conn,
                        endpoint,
                        request,
                        tx.clone(),
                        cancel_rx,
                        guard.clone(),
                    )));
                }
                Out::Action(Action::Close { conn }) => {
                    tracing::trace!(%conn, "closing");
                    sink.closed(conn);
                    conns.remove(&conn);
                }
                Out::Action(other) => tracing::debug!(action = ?other, "unsupported action"),
                Out::Event(e) => sink.publish(&machine, e),
                Out::Persist(p) => sink.persist(p),
                Out::Wait(w) => break w,
            }
        };
        if shutting_down {
            sink.drained(&machine);
            break;
        }
        // More input already waiting joins this round (up to `MAX_BATCH` inputs), so
        // that a burst (a flood of patches read ahead by the connection task) is
        // published once per round, not once per read: every published snapshot makes
        // the store copy the map nodes its next writes touch.
        let due = wait.is_some_and(|deadline| rt.now() >= deadline);
        if !due
            && batched < MAX_BATCH
            && let Ok(msg) = inbox.try_recv()
        {
            batched += 1;
            handle(
                &mut machine,
                &mut sink,
                &mut conns,
                &mut shutting_down,
                rt.now(),
                msg,
            );
            continue;
        }
        batched = 0;
        sink.drained(&machine);
        let msg = match wait {
            Some(deadline) if rt.now() >= deadline => {
                machine.handle(rt.now(), In::Timeout);
                continue;
            }
            Some(deadline) => {
                let sleep = match timer.take() {
                    Some((at, fut)) if at == deadline => fut,
                    _ => rt.sleep_until(deadline),
                };
                let mut sleep = Some(sleep);
                let res = race(inbox.recv(), async {
                    if let Some(s) = sleep.as_mut() {
                        s.await;
                    }
                })
                .await;
                match res {
                    Ok(msg) => {
                        // Keep the pending timer for the next round.
                        timer = sleep.map(|s| (deadline, s));
                        msg
                    }
                    Err(()) => continue, // re-check `now` against the deadline
                }
            }
            None => inbox.recv().await,
        };
        let Ok(msg) = msg else { break };
        batched = 1;
        handle(
            &mut machine,
            &mut sink,
            &mut conns,
            &mut shutting_down,
            rt.now(),
            msg,
        );
    }
    conns.clear();
    inbox.close();
    sink.finish(&machine);
    tracing::debug!("driver ended");
}

/// Feed one inbox message to the machine (its outputs are drained by the caller).
fn handle<M: Machine, S: Sink<M>>(
    machine: &mut M,
    sink: &mut S,
    conns: &mut HashMap<ConnId, async_channel::Sender<()>>,
    shutting_down: &mut bool,
    now: Instant,
    msg: Msg<M::Command>,
) {
    match msg {
        Msg::Connected(conn) => machine.handle(now, In::Connected(conn)),
        Msg::Data(conn, bytes) => {
            sink.received(bytes.len());
            sink.data(conn, &bytes);
            machine.handle(now, In::Data(conn, &bytes));
        }
        Msg::Closed(conn, cause) => {
            sink.closed(conn);
            conns.remove(&conn);
            machine.handle(now, In::Closed(conn, cause));
        }
        Msg::Command(c) => machine.handle(now, In::Command(c)),
        Msg::Store(report) => machine.handle(now, In::Store(report)),
        Msg::Source(report) => machine.handle(now, In::Source(report)),
        Msg::Shutdown => {
            machine.stop(now);
            *shutting_down = true;
        }
    }
}

/// Start [`run`] with [`Runtime::spawn_driver`] (a task of `rt`, or a thread of its
/// own on a runtime that moves tasks between threads); the guard's `Finished` is marked
/// once it, all its connections and every other holder of `guard` (the store tasks) end.
pub(crate) fn spawn<M: Machine, S: Sink<M>>(
    rt: Arc<dyn Runtime>,
    conn_config: Arc<ConnConfig>,
    machine: M,
    sink: S,
    tx: async_channel::Sender<Msg<M::Command>>,
    inbox: async_channel::Receiver<Msg<M::Command>>,
    guard: Arc<TaskGuard>,
) {
    let this = rt.clone();
    rt.spawn_driver(
        this,
        Box::new(move |rt| {
            Box::pin(run(rt, conn_config, machine, sink, tx, inbox, guard))
                as crate::runtime::BoxFuture<'static, ()>
        }),
    );
}

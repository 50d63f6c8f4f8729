//! OFREP's change notices (ADR 0008, `eventStreams`): `GET …/ofrep/v1/changes?channel=T`
//! is a `text/event-stream` held by the server's stream hub, which sends
//!
//! ```text
//! id: 7
//! event: message
//! data: {"type":"refetchEvaluation","etag":"\"<epoch>-7\""}
//! ```
//!
//! whenever the environment's data changes (any flag or segment, whether or not it
//! changes what a given context gets: the provider then re-fetches, and a bulk
//! evaluation whose answer did not change is `304`), and a comment heartbeat as FDv1
//! streams get. `id` is the data version, `etag` the data state (OFREP's
//! `flagConfigEtag` comes back with the re-fetch; the server answers from its current
//! data whatever it says). The channel token comes with a bulk evaluation (see
//! [`super::channels`]). Every stream begins with a notice of the data as it is when it
//! opens, so a change made between a provider's bulk evaluation and its connection (or
//! while it reconnects) is never missed; a re-fetch with nothing new is a `304`, so
//! `Last-Event-ID` needs no replay. The hub counts these streams
//! with the FDv1 ones in `/metrics`.

use std::io;
use std::sync::Arc;

use super::channels::hub_key;
use crate::http::{self, Request};
use crate::hub::{Frame, NewStream};
use crate::metrics::StreamKind;
use crate::state::{Inner, Shared};
use crate::transport::Transport;

/// The notice of environment `env`'s current data.
fn notice(inner: &Inner, env: usize) -> String {
    let data = &inner.envs[env].data;
    let etag = serde_json::to_string(&format!("\"{}\"", data.state())).unwrap_or_default();
    format!(
        "id: {}\nevent: message\ndata: {{\"type\":\"refetchEvaluation\",\"etag\":{etag}}}\n\n",
        data.version()
    )
}

/// Environment `env`'s data changed: tell its notice streams (called with the server's
/// lock held, as its other streams are told, so notices follow the changes in order).
/// Nothing is sent before a bulk evaluation handed out the environment's channel (no
/// notice stream can be open then), so a server not asked for OFREP sends the hub
/// nothing more.
pub(crate) fn notify(shared: &Shared, inner: &Inner, env: usize) {
    if !shared.ofrep.channels.issued(env) {
        return;
    }
    let frame = Frame::new(notice(inner, env).into_bytes());
    shared.hub.broadcast(hub_key(env), frame.clone(), frame);
}

/// Hand the connection to the hub as environment `env`'s notice stream.
pub(crate) fn open(
    shared: &Arc<Shared>,
    env: usize,
    req: &Request,
    cors: &[(&str, &str)],
    io: &mut Option<Transport>,
) -> io::Result<()> {
    let socket = io.take().ok_or(io::ErrorKind::NotConnected)?;
    let chunked = !req.http10;
    let head = http::stream_head(chunked, cors);
    // The first notice is of the data as it is when the stream opens, and the stream
    // joins the hub under the same lock, so no change falls between them: a provider
    // whose bulk evaluation came before a change it has not seen yet (the change came
    // while it was connecting) re-fetches and gets it; otherwise its re-fetch names the
    // current ETag and gets `304`.
    let inner = shared.lock();
    let first = format!(": ofrep change notices\n\n{}", notice(&inner, env));
    shared.hub.add(NewStream {
        socket,
        env: hub_key(env),
        kind: StreamKind::Ofrep,
        chunked,
        head,
        first: Some(Frame::new(first.into_bytes())),
        close_after: false,
        evaluated: None,
    });
    drop(inner);
    Ok(())
}

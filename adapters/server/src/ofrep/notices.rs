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
//! [`super::channels`]); a stream's `Last-Event-ID` is not replayed (the provider
//! re-fetches on reconnect anyway, as ADR 0008 asks). The hub counts these streams
//! with the FDv1 ones in `/metrics`.

use std::io;
use std::sync::Arc;

use super::channels::hub_key;
use crate::http::{self, Request};
use crate::hub::{Frame, NewStream};
use crate::state::{Inner, Shared};
use crate::transport::Transport;

/// The notice of environment `env`'s current data.
fn notice(inner: &Inner, env: usize) -> Frame {
    let data = &inner.envs[env].data;
    let etag = serde_json::to_string(&format!("\"{}\"", data.state())).unwrap_or_default();
    Frame::new(
        format!(
            "id: {}\nevent: message\ndata: {{\"type\":\"refetchEvaluation\",\"etag\":{etag}}}\n\n",
            data.version()
        )
        .into_bytes(),
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
    let frame = notice(inner, env);
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
    shared.hub.add(NewStream {
        socket,
        env: hub_key(env),
        fdv2: false,
        chunked,
        head,
        // A comment, so that a client sees the stream open at once.
        first: Some(Frame::new(&b": ofrep change notices\n\n"[..])),
        close_after: false,
        evaluated: None,
    });
    Ok(())
}

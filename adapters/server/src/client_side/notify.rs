//! A change of an environment's data, handed to its client-side and mobile streams.

use crate::client_side::eval::Evaluation;
use crate::state::{Env, Shared};

/// Tell the stream hub that environment `env` (`e`) changed, with its data as the
/// engine reads it and the flags the change changed, so that the hub evaluates them
/// for each of the environment's evaluating streams. Called under the server's lock,
/// in the order of the changes; nothing is evaluated here. Nothing is sent until an
/// evaluating stream has been opened (then the engine's store is built and follows
/// every change).
pub(crate) fn evaluate_change(shared: &Shared, e: &mut Env, env: usize) {
    if !shared.hub.has_evaluated_streams() {
        return;
    }
    let snapshot = e.data.eval_snapshot();
    let changed = e.data.changed_flags().map(<[String]>::to_vec);
    shared.hub.evaluate(Evaluation {
        env,
        snapshot,
        changed,
        version: e.data.version(),
    });
}

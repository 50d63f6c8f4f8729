//! The change-notice channels of OFREP's `eventStreams`: one per environment, named
//! by a random token.
//!
//! Browsers open an event stream with `EventSource`, which sends no `Authorization`
//! header, so the stream's URL must carry what lets it in, and OFREP calls that URL
//! opaque. It carries a token made for the environment when its first bulk evaluation
//! is answered (128 random bits, new with every server run), never the SDK key: a
//! token only lets one hear *that* an environment's data changed (no flag, no value),
//! and is only given to a client whose key the bulk endpoint accepted.

use std::sync::{Mutex, MutexGuard};

/// Every environment's channel token, made on first use.
#[derive(Debug, Default)]
pub(crate) struct Channels {
    tokens: Mutex<Vec<(usize, String)>>,
}

impl Channels {
    fn lock(&self) -> MutexGuard<'_, Vec<(usize, String)>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Environment `env`'s token (made now if it has none).
    pub(crate) fn token(&self, env: usize) -> String {
        let mut tokens = self.lock();
        if let Some((_, t)) = tokens.iter().find(|(e, _)| *e == env) {
            return t.clone();
        }
        let token = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        tokens.push((env, token.clone()));
        token
    }

    /// Whether environment `env` has a token (so its notice streams may be open).
    pub(crate) fn issued(&self, env: usize) -> bool {
        self.lock().iter().any(|(e, _)| *e == env)
    }

    /// The environment whose token is `token`.
    pub(crate) fn env_of(&self, token: &str) -> Option<usize> {
        self.lock()
            .iter()
            .find(|(_, t)| t.as_bytes() == token.as_bytes())
            .map(|(e, _)| *e)
    }
}

/// The stream hub's key for environment `env`'s notice streams: the hub sends a change
/// to the streams of one key, and these keys lie beyond every environment's index, so
/// the FDv1 and FDv2 changes of `env` never reach a notice stream and notices reach no
/// SDK stream.
pub(crate) fn hub_key(env: usize) -> usize {
    usize::MAX - env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_per_environment_and_found_again() {
        let c = Channels::default();
        let (a, b) = (c.token(0), c.token(3));
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert_eq!(c.token(0), a);
        assert!(c.issued(3) && !c.issued(1));
        assert_eq!(
            (c.env_of(&a), c.env_of(&b), c.env_of("nope")),
            (Some(0), Some(3), None)
        );
        assert_ne!(hub_key(0), 0);
    }
}

//! `Client::secure_mode_hash`: the hash a client-side SDK sends in secure mode
//! ([`flagsync_eval::SecureModeKey`], keyed with the client's SDK key).

use super::Context;
use crate::Client;

impl Client {
    /// The secure mode hash of `context`: HMAC-SHA256 of its canonical key
    /// ([`Context::canonical_key`]: the key for a user, `kind:key` otherwise, the
    /// parts joined with `:` for a multi-context), keyed with the SDK key, in lower-case
    /// hex, as every LaunchDarkly server-side SDK computes it. A client-side SDK in
    /// secure mode sends it along with the context.
    ///
    /// It needs no data and no connection. The SDK key is the one the client sends
    /// (after any [`ClientBuilder::core_config`](crate::ClientBuilder::core_config)
    /// change); it is never logged.
    ///
    /// ```
    /// use flagsync::eval::ContextBuilder;
    ///
    /// let client = flagsync::Client::builder("secret").build()?;
    /// let context = ContextBuilder::new("Message").build().expect("a valid context");
    /// assert_eq!(
    ///     client.secure_mode_hash(&context),
    ///     "aa747c502a898200f9e4fa21bac68136f886a0e27aec70ba06daf2e2a5cb5597"
    /// );
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn secure_mode_hash(&self, context: &Context) -> String {
        self.inner.secure_mode.context_hash(context)
    }
}

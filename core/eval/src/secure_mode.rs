//! The secure mode hash: what a client-side SDK sends along with a context in secure
//! mode.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::Context;

/// HMAC-SHA256 keyed with the client's SDK key, ready to hash context keys.
///
/// It holds the keyed HMAC state, not the key text, and its `Debug` shows neither.
#[derive(Clone)]
pub struct SecureModeKey(Hmac<Sha256>);

impl SecureModeKey {
    /// The HMAC for `sdk_key`.
    pub fn new(sdk_key: &str) -> Self {
        // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(sdk_key.as_bytes())
            .expect("HMAC accepts keys of any length");
        Self(mac)
    }

    /// HMAC-SHA256 of `message`, in lower-case hex.
    pub fn hash(&self, message: &str) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut mac = self.0.clone();
        mac.update(message.as_bytes());
        let tag = mac.finalize().into_bytes();
        let mut hex = String::with_capacity(tag.len() * 2);
        for byte in tag {
            hex.push(char::from(HEX[usize::from(byte >> 4)]));
            hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        hex
    }

    /// The secure mode hash of `context`: HMAC-SHA256 of its canonical key
    /// ([`Context::canonical_key`]: the key for a user, `kind:key` otherwise, the parts
    /// joined with `:` for a multi-context), in lower-case hex, as every LaunchDarkly
    /// server-side SDK computes it.
    ///
    /// ```
    /// use flagsync_eval::{ContextBuilder, SecureModeKey};
    ///
    /// let key = SecureModeKey::new("secret");
    /// let context = ContextBuilder::new("Message").build().expect("a valid context");
    /// assert_eq!(
    ///     key.context_hash(&context),
    ///     "aa747c502a898200f9e4fa21bac68136f886a0e27aec70ba06daf2e2a5cb5597"
    /// );
    /// ```
    pub fn context_hash(&self, context: &Context) -> String {
        self.hash(context.canonical_key())
    }
}

impl std::fmt::Debug for SecureModeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecureModeKey(<redacted>)")
    }
}

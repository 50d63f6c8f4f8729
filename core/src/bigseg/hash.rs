//! The store key of a context's big-segment membership.

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Base64 (standard alphabet, padded) of the SHA-256 of `context_key`: the hash
/// LaunchDarkly's SDKs and Relay Proxy file big-segment membership under.
pub fn context_hash(context_key: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(context_key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_base64_of_sha256() {
        // echo -n userkey | openssl dgst -sha256 -binary | base64
        assert_eq!(
            context_hash("userkey"),
            "72cBpXPyn4N6TqqlS8Tti37jEcoNhFzL9ZdG1jXkILE="
        );
    }

    #[test]
    fn membership_include_wins() {
        let m = super::super::Membership::from_refs(["a.g1"], ["a.g1", "b.g2"]);
        assert_eq!(m.check("a.g1"), Some(true));
        assert_eq!(m.check("b.g2"), Some(false));
        assert_eq!(m.check("c.g3"), None);
        assert_eq!(super::super::segment_ref("a", 1), "a.g1");
    }
}

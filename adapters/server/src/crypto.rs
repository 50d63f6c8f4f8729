//! The rustls crypto provider of the TLS listeners, chosen by the `ring` (default) and
//! `aws-lc-rs` features: aws-lc-rs when its feature is on (also with `ring`: cargo
//! unifies features, and asking for aws-lc-rs is deliberate), else ring. Every
//! `ServerConfig` is built with it explicitly (`builder_with_provider`), never with
//! rustls' process-wide default. A build with neither feature has no provider: its
//! TLS settings are refused at start (plain HTTP still works).

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The crypto provider of the TLS listeners; an error naming the missing feature in a
/// build without one.
pub(crate) fn provider() -> Result<Arc<CryptoProvider>, String> {
    #[cfg(feature = "aws-lc-rs")]
    return Ok(Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    #[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
    return Ok(Arc::new(rustls::crypto::ring::default_provider()));
    #[cfg(not(any(feature = "ring", feature = "aws-lc-rs")))]
    Err(
        "TLS needs a crypto provider: flagsync-server was built without its `ring` and \
         `aws-lc-rs` features"
            .into(),
    )
}

/// The name of the rustls crypto provider of the TLS listeners: `"aws-lc-rs"` with the
/// `aws-lc-rs` feature (whether or not `ring` is also enabled), `"ring"` with `ring`
/// alone, `"none"` with neither (TLS settings are then refused). A build with
/// rustls' `fips` feature says `"aws-lc-rs (FIPS)"`.
pub fn crypto_provider_name() -> &'static str {
    provider().map_or("none", |p| name_of(&p))
}

/// The name of `provider`, as [`crypto_provider_name`] gives it, or `"other"` for a
/// provider that is neither ring's nor aws-lc-rs'. Told by its key provider (rustls
/// names its types `Ring` and `AwsLcRs`), so it names the provider a configuration
/// really holds.
pub(crate) fn name_of(provider: &CryptoProvider) -> &'static str {
    match format!("{:?}", provider.key_provider).as_str() {
        "AwsLcRs" if provider.fips() => "aws-lc-rs (FIPS)",
        "AwsLcRs" => "aws-lc-rs",
        "Ring" => "ring",
        _ => "other",
    }
}

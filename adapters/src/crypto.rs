//! The rustls crypto provider of this build, chosen by the `ring` and `aws-lc-rs`
//! features: aws-lc-rs when its feature is on (also with `ring`: cargo unifies features,
//! and asking for aws-lc-rs is deliberate), else ring. Every TLS configuration is built
//! with it explicitly (`builder_with_provider`), never with rustls' process-wide
//! default, so a process with both providers compiled in cannot panic for want of a
//! default, and a default installed by other code does not change flagsync's choice.

use std::sync::Arc;

use futures_rustls::rustls::crypto::CryptoProvider;

#[cfg(not(any(feature = "ring", feature = "aws-lc-rs")))]
compile_error!(
    "flagsync's TLS needs a crypto provider: enable the `rustls` (ring), `ring` or `aws-lc-rs` feature"
);

/// The crypto provider every TLS configuration of the SDK is built with.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    #[cfg(feature = "aws-lc-rs")]
    let provider = futures_rustls::rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
    let provider = futures_rustls::rustls::crypto::ring::default_provider();
    Arc::new(provider)
}

/// The name of the rustls crypto provider the SDK's TLS connections use: `"aws-lc-rs"`
/// with the `aws-lc-rs` feature (whether or not `ring` is also enabled), else `"ring"`.
/// A build with rustls' `fips` feature says `"aws-lc-rs (FIPS)"`.
pub fn crypto_provider_name() -> &'static str {
    name_of(&provider())
}

/// The name of `provider`, as [`crypto_provider_name`] gives it, or `"other"` for a
/// provider that is neither ring's nor aws-lc-rs'. Told by its key provider (rustls
/// names its types `Ring` and `AwsLcRs`), so it names the provider a configuration
/// really holds, not the one this build meant to choose.
pub(crate) fn name_of(provider: &CryptoProvider) -> &'static str {
    match format!("{:?}", provider.key_provider).as_str() {
        "AwsLcRs" if provider.fips() => "aws-lc-rs (FIPS)",
        "AwsLcRs" => "aws-lc-rs",
        "Ring" => "ring",
        _ => "other",
    }
}

//! Connection settings shared by the client and the SSE client builders: runtime,
//! proxy and TLS.

use std::sync::Arc;

use crate::Error;
use crate::conn::ConnConfig;
use crate::proxy::{Proxy, ProxySettings};
use crate::runtime::Runtime;

/// Where the proxy comes from. `Debug` never shows the URL's credentials.
#[derive(Clone, Default)]
pub(crate) enum ProxyChoice {
    /// `HTTP_PROXY` / `HTTPS_PROXY` / `NO_PROXY` (the default).
    #[default]
    Environment,
    /// No proxy.
    None,
    /// This proxy URL for every connection.
    Url(String),
}

impl std::fmt::Debug for ProxyChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Environment => f.write_str("Environment"),
            Self::None => f.write_str("None"),
            Self::Url(url) => {
                // `scheme://user:password@host` → `scheme://<redacted>@host`.
                let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
                let shown = match rest.rsplit_once('@') {
                    Some((_, host)) if scheme.is_empty() => format!("<redacted>@{host}"),
                    Some((_, host)) => format!("{scheme}://<redacted>@{host}"),
                    None => url.clone(),
                };
                f.debug_tuple("Url").field(&shown).finish()
            }
        }
    }
}

/// Runtime, proxy and TLS options as given to a builder.
#[derive(Debug, Clone, Default)]
pub(crate) struct Transport {
    pub(crate) runtime: Option<Arc<dyn Runtime>>,
    pub(crate) proxy: ProxyChoice,
    #[cfg(feature = "tls")]
    pub(crate) tls: crate::tls::TlsOptions,
}

impl Transport {
    /// Check and build the connection settings.
    pub(crate) fn conn_config(&self) -> Result<ConnConfig, Error> {
        let proxy = match &self.proxy {
            ProxyChoice::Environment => ProxySettings::from_env(|name| std::env::var(name).ok()),
            ProxyChoice::None => ProxySettings::default(),
            ProxyChoice::Url(url) => ProxySettings {
                explicit: Some(Proxy::parse(url)?),
                ..ProxySettings::default()
            },
        };
        Ok(ConnConfig {
            proxy,
            #[cfg(feature = "tls")]
            tls: Some(crate::tls::TlsConnector::new(&self.tls).map_err(Error::Tls)?),
        })
    }

    /// The runtime given to the builder, or the default one for the calling context.
    pub(crate) fn runtime(&self) -> Result<Arc<dyn Runtime>, Error> {
        match &self.runtime {
            Some(rt) => Ok(rt.clone()),
            None => crate::runtime::default_runtime().ok_or(Error::NoRuntime),
        }
    }
}

/// The proxy, TLS and runtime methods every builder has.
macro_rules! transport_methods {
    () => {
        /// Connect through this HTTP proxy (`http://[user:password@]host:port`) with
        /// `CONNECT`, for `http` and `https` targets alike. Without it,
        /// `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` are honoured.
        pub fn proxy(mut self, url: impl Into<String>) -> Self {
            self.transport.proxy = crate::transport::ProxyChoice::Url(url.into());
            self
        }

        /// Use no proxy, ignoring the environment.
        pub fn no_proxy(mut self) -> Self {
            self.transport.proxy = crate::transport::ProxyChoice::None;
            self
        }

        /// Run on this runtime instead of the default one (tokio when called inside a
        /// tokio runtime, otherwise smol or async-std, depending on features).
        pub fn runtime(mut self, runtime: std::sync::Arc<dyn crate::runtime::Runtime>) -> Self {
            self.transport.runtime = Some(runtime);
            self
        }

        /// Also trust the certificates in this PEM data (e.g. a private CA).
        ///
        /// Server certificates are matched to the host name by their subjectAltName
        /// extension. A certificate with no subjectAltName at all (or one without any DNS
        /// or IP address entry) is matched by its subject Common Name instead, as OpenSSL
        /// and the SDKs built on it do (RFC 6125 §6.4.4): private CAs still issue such
        /// certificates, LaunchDarkly's sdk-test-harness serves one with only
        /// `CN=localhost`. This applies to DNS names only, never to IP addresses, and a
        /// wildcard is allowed only as the whole left-most label; the chain, validity
        /// and key usage are checked as for any certificate, and no name-constrained CA
        /// may vouch for a Common Name. A certificate with any DNS or IP subjectAltName
        /// is judged by it alone.
        #[cfg(feature = "tls")]
        pub fn add_root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
            self.transport.tls.extra_roots_pem.push(pem.into());
            self
        }

        /// Trust the built-in root certificates (webpki roots, plus the platform's with
        /// the `native-roots` feature). On by default.
        #[cfg(feature = "tls")]
        pub fn tls_built_in_roots(mut self, enabled: bool) -> Self {
            self.transport.tls.built_in_roots = enabled;
            self
        }

        /// Accept any server certificate for any host name.
        ///
        /// # Warning
        /// This turns off the protection TLS gives against impersonation. Use it only
        /// for tests against servers you control.
        #[cfg(feature = "tls")]
        pub fn danger_accept_invalid_certs(mut self, accept: bool) -> Self {
            self.transport.tls.accept_invalid_certs = accept;
            self
        }
    };
}
pub(crate) use transport_methods;

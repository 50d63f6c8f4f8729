//! Which client-side or mobile endpoint a request is for (from its path alone), and
//! the context it names: base64 in the path, or JSON in a `REPORT` body.
//!
//! The endpoints, as LaunchDarkly's service and Relay Proxy serve them:
//!
//! | path | method | what |
//! | --- | --- | --- |
//! | `/sdk/evalx/{envId}/contexts/{ctx}`, `/sdk/evalx/{envId}/users/{user}` | GET | client-side poll |
//! | `/sdk/evalx/{envId}/context`, `/sdk/evalx/{envId}/user` | REPORT | client-side poll |
//! | `/eval/{envId}/{ctx}` / `/eval/{envId}` | GET / REPORT | client-side stream |
//! | `/sdk/goals/{envId}` | GET | goals |
//! | `/events/bulk/{envId}`, `/events/diagnostic/{envId}` | POST | browser events |
//! | `/a/{envId}.gif?d={base64 events}` | GET | browser events as an image |
//! | `/msdk/evalx/contexts/{ctx}`, `/msdk/evalx/users/{user}` | GET | mobile poll |
//! | `/msdk/evalx/context`, `/msdk/evalx/user` | REPORT | mobile poll |
//! | `/meval/{ctx}` / `/meval` | GET / REPORT | mobile stream |
//! | `/mobile`, `/mobile/events`, `/mobile/events/bulk`, `/mobile/events/diagnostic` | POST | mobile events |
//!
//! Every client-side path also answers `OPTIONS` (a CORS preflight).

use flagsync_eval::Context;

/// Who a request must be authorized as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth<'a> {
    /// A client-side request: the environment's client-side ID, in the path.
    EnvId(&'a str),
    /// A mobile request: the mobile key, in `Authorization`.
    Mobile,
}

/// Where a request's context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctx<'a> {
    /// Base64 in the path (`GET`).
    Path(&'a str),
    /// JSON in the body (`REPORT`).
    Body,
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum What<'a> {
    /// Every flag evaluated, once.
    Poll(Ctx<'a>),
    /// Every flag evaluated, then each change.
    Stream(Ctx<'a>),
    /// The environment's goals.
    Goals,
    /// Analytics events (`true`: diagnostic).
    Events(bool),
    /// Analytics events in the `d` query parameter, answered with an image.
    Gif,
}

/// A client-side or mobile request, as its path says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route<'a> {
    pub(crate) auth: Auth<'a>,
    pub(crate) what: What<'a>,
}

impl Route<'_> {
    /// The method the endpoint takes (besides `OPTIONS`).
    pub(crate) fn method(&self) -> &'static str {
        match self.what {
            What::Poll(Ctx::Body) | What::Stream(Ctx::Body) => "REPORT",
            What::Events(_) => "POST",
            _ => "GET",
        }
    }

    /// Whether it opens a stream.
    pub(crate) fn streams(&self) -> bool {
        matches!(self.what, What::Stream(_))
    }

    /// Its name in `GET /metrics`.
    pub(crate) fn metric(&self) -> &'static str {
        match (self.auth, self.what) {
            (Auth::EnvId(_), What::Poll(_)) => "/sdk/evalx",
            (Auth::EnvId(_), What::Stream(_)) => "/eval",
            (_, What::Goals) => "/sdk/goals",
            (Auth::EnvId(_), What::Events(_) | What::Gif) => "/events",
            (Auth::Mobile, What::Poll(_)) => "/msdk/evalx",
            (Auth::Mobile, What::Stream(_)) => "/meval",
            (Auth::Mobile, _) => "/mobile",
        }
    }
}

/// The client-side or mobile endpoint of `path`, if it is one.
pub(crate) fn classify(path: &str) -> Option<Route<'_>> {
    let parts: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let env = |id: &'_ str| !id.is_empty();
    let (auth, what) = match parts.as_slice() {
        ["sdk", "evalx", id, "contexts" | "users", ctx] if env(id) => {
            (Auth::EnvId(id), What::Poll(Ctx::Path(ctx)))
        }
        ["sdk", "evalx", id, "context" | "user"] if env(id) => {
            (Auth::EnvId(id), What::Poll(Ctx::Body))
        }
        ["eval", id, ctx] if env(id) => (Auth::EnvId(id), What::Stream(Ctx::Path(ctx))),
        ["eval", id] if env(id) => (Auth::EnvId(id), What::Stream(Ctx::Body)),
        ["sdk", "goals", id] if env(id) => (Auth::EnvId(id), What::Goals),
        ["events", "bulk", id] if env(id) => (Auth::EnvId(id), What::Events(false)),
        ["events", "diagnostic", id] if env(id) => (Auth::EnvId(id), What::Events(true)),
        ["a", gif] => {
            let id = gif.strip_suffix(".gif").filter(|id| env(id))?;
            (Auth::EnvId(id), What::Gif)
        }
        ["msdk", "evalx", "contexts" | "users", ctx] => (Auth::Mobile, What::Poll(Ctx::Path(ctx))),
        ["msdk", "evalx", "context" | "user"] => (Auth::Mobile, What::Poll(Ctx::Body)),
        ["meval", ctx] => (Auth::Mobile, What::Stream(Ctx::Path(ctx))),
        ["meval"] => (Auth::Mobile, What::Stream(Ctx::Body)),
        ["mobile"] | ["mobile", "events"] | ["mobile", "events", "bulk"] => {
            (Auth::Mobile, What::Events(false))
        }
        ["mobile", "events", "diagnostic"] => (Auth::Mobile, What::Events(true)),
        _ => return None,
    };
    Some(Route { auth, what })
}

/// Decode base64 in either alphabet (standard or URL-safe), padded or not, as the SDKs
/// send contexts (js-core: URL-safe; older SDKs: standard). `None`: not base64.
pub(crate) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    /// The standard alphabet, padded or not, unused bits not required to be zero.
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    // A path segment may carry the padding percent-encoded.
    let text = text.trim_end_matches("%3D").trim_end_matches("%3d");
    // The URL-safe alphabet differs in two characters only.
    let standard: Vec<u8> = text
        .bytes()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => b,
        })
        .collect();
    LENIENT.decode(standard).ok()
}

/// The context of a request: from base64 in the path, or the body's JSON (a context or
/// an old-style user). `Err`: a message for a `400`.
pub(crate) fn context(ctx: Ctx<'_>, body: &[u8]) -> Result<Context, String> {
    let decoded;
    let json = match ctx {
        Ctx::Path(text) => {
            decoded = base64_decode(text).ok_or("the context in the path is not base64")?;
            &decoded[..]
        }
        Ctx::Body => body,
    };
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|_| "the context is not valid JSON".to_owned())?;
    serde_json::from_value::<Context>(value).map_err(|e| format!("invalid context: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_both_alphabets_padded_or_not() {
        assert_eq!(base64_decode("eyJrZXkiOiJhIn0").unwrap(), br#"{"key":"a"}"#);
        assert_eq!(
            base64_decode("eyJrZXkiOiJhIn0=").unwrap(),
            br#"{"key":"a"}"#
        );
        assert_eq!(base64_decode("-_8").unwrap(), base64_decode("+/8").unwrap());
        assert_eq!(base64_decode("-_8").unwrap(), vec![0xfb, 0xff]);
        assert!(base64_decode("a").is_none());
        assert!(base64_decode("a!bc").is_none());
        assert_eq!(base64_decode("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn classifies_paths() {
        assert_eq!(
            classify("/sdk/evalx/e1/contexts/abc"),
            Some(Route {
                auth: Auth::EnvId("e1"),
                what: What::Poll(Ctx::Path("abc"))
            })
        );
        assert_eq!(classify("/a/e1.gif").unwrap().what, What::Gif);
        assert_eq!(classify("/mobile/events/bulk").unwrap().auth, Auth::Mobile);
        assert_eq!(classify("/meval").unwrap().method(), "REPORT");
        assert!(classify("/sdk/latest-all").is_none());
        assert!(classify("/sdk/evalx//contexts/x").is_none());
        assert!(classify("/bulk").is_none());
    }

    /// Random bytes, as a path segment or a body, never panic: each is a context or a
    /// message.
    #[test]
    fn hostile_contexts_are_messages() {
        let mut rng = fastrand::Rng::with_seed(40);
        let alphabet = b"AZaz09+/-_=%{}\"[]:,.";
        for _ in 0..20_000 {
            let len = rng.usize(0..64);
            let text: String = (0..len)
                .map(|_| char::from(alphabet[rng.usize(..alphabet.len())]))
                .collect();
            let _ = context(Ctx::Path(&text), b"");
            let body: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            let _ = context(Ctx::Body, &body);
            let _ = classify(&format!("/{text}"));
        }
        let deep = "[".repeat(10_000);
        assert!(context(Ctx::Body, deep.as_bytes()).is_err());
    }
}

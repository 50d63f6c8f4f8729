//! The request headers every data-source request carries (PROTOCOL.md B §1.2).

/// `[a-zA-Z0-9._-]`, 1 to `max` bytes: what an SDK key and an application tag may be.
pub(crate) fn is_token(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `User-Agent` of every request: `flagsync/<version>`.
pub const USER_AGENT: &str = concat!("flagsync/", env!("CARGO_PKG_VERSION"));

/// Who is asking: the SDK key and the optional identification headers.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RequestIdentity {
    /// The SDK key, sent as `Authorization` with no scheme.
    pub sdk_key: String,
    /// `application-id` of `X-LaunchDarkly-Tags`.
    pub application_id: Option<String>,
    /// `application-version` of `X-LaunchDarkly-Tags`.
    pub application_version: Option<String>,
    /// `X-LaunchDarkly-Wrapper`: name and optional version.
    pub wrapper: Option<(String, Option<String>)>,
    /// `X-LaunchDarkly-Instance-Id`, if the caller made one.
    pub instance_id: Option<String>,
}

impl std::fmt::Debug for RequestIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the SDK key.
        f.debug_struct("RequestIdentity")
            .field("sdk_key", &"<redacted>")
            .field("application_id", &self.application_id)
            .field("application_version", &self.application_version)
            .field("wrapper", &self.wrapper)
            .field("instance_id", &self.instance_id)
            .finish()
    }
}

impl RequestIdentity {
    /// The headers, in a fixed order. An SDK key that fails validation (more than 8192
    /// characters, or characters outside `[a-zA-Z0-9._-]`) is sent as `""`; invalid
    /// application ids and versions (over 64 characters) are dropped.
    pub fn headers(&self) -> Vec<(String, String)> {
        let key = if is_token(&self.sdk_key, 8192) {
            self.sdk_key.as_str()
        } else {
            ""
        };
        let mut h = vec![
            ("Authorization".to_owned(), key.to_owned()),
            ("User-Agent".to_owned(), USER_AGENT.to_owned()),
        ];
        if let Some(id) = &self.instance_id {
            h.push(("X-LaunchDarkly-Instance-Id".into(), id.clone()));
        }
        let tags: Vec<String> = [
            ("application-id", &self.application_id),
            ("application-version", &self.application_version),
        ]
        .into_iter()
        .filter_map(|(name, v)| {
            v.as_deref()
                .filter(|v| is_token(v, 64))
                .map(|v| format!("{name}/{v}"))
        })
        .collect();
        if !tags.is_empty() {
            h.push(("X-LaunchDarkly-Tags".into(), tags.join(" ")));
        }
        if let Some((name, version)) = &self.wrapper
            && !name.is_empty()
        {
            let value = match version {
                Some(v) if !v.is_empty() => format!("{name}/{v}"),
                _ => name.clone(),
            };
            h.push(("X-LaunchDarkly-Wrapper".into(), value));
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_follow_the_reference_rules() {
        let id = RequestIdentity {
            sdk_key: "sdk-abc".into(),
            application_id: Some("app".into()),
            application_version: Some("bad version".into()),
            wrapper: Some(("Wrap".into(), Some("1.0".into()))),
            instance_id: None,
        };
        let h = id.headers();
        assert_eq!(h[0], ("Authorization".into(), "sdk-abc".into()));
        assert!(h.contains(&("X-LaunchDarkly-Tags".into(), "application-id/app".into())));
        assert!(h.contains(&("X-LaunchDarkly-Wrapper".into(), "Wrap/1.0".into())));
        let bad = RequestIdentity {
            sdk_key: "key with\nnewline".into(),
            ..Default::default()
        };
        assert_eq!(bad.headers()[0].1, "");
        assert!(!format!("{id:?}").contains("sdk-abc"));
        let shown = format!("{:?}", crate::http1::RedactedHeaders(&h));
        assert!(
            !shown.contains("sdk-abc")
                && shown.contains("<redacted>")
                && shown.contains("Wrap/1.0")
        );
    }
}

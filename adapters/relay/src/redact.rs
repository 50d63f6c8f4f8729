//! URIs for logs and people: without their credentials.

/// `uri` for people and logs: user information (`user:password@`) replaced by `***@`.
///
/// ```
/// use flagsync_relay::redact_userinfo;
///
/// assert_eq!(
///     redact_userinfo("http://user:pw@relay.example:1/base?x=a@b"),
///     "http://***@relay.example:1/base?x=a@b"
/// );
/// assert_eq!(redact_userinfo("https://relay.example/a@b"), "https://relay.example/a@b");
/// assert_eq!(redact_userinfo("relay.example:1"), "relay.example:1");
/// ```
pub fn redact_userinfo(uri: &str) -> String {
    let (scheme, rest) = match uri.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), uri),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}***@{host}{tail}"),
        None => uri.to_owned(),
    }
}

//! [`CliError`]: a failure to report, with its exit code.

/// A failure to report: a message saying what to do, and the exit code.
#[derive(Debug)]
pub(crate) struct CliError {
    pub(crate) message: String,
    pub(crate) code: u8,
}

impl CliError {
    /// Bad input (arguments, files): exit code 2.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// The operation failed: exit code 1.
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }
}

/// Why the server did not start: a port that cannot be bound says how to choose
/// another; any other error is `other`'s.
pub(crate) fn start_error(
    e: flagsync_server::ServerError,
    other: impl FnOnce(flagsync_server::ServerError) -> CliError,
) -> CliError {
    match e {
        flagsync_server::ServerError::Bind { addr, source } => CliError::failed(format!(
            "cannot listen on {addr}: {source}. Choose another address with --listen ADDR:PORT or another port with --port (0 picks a free one)"
        )),
        e => other(e),
    }
}

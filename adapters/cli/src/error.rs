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

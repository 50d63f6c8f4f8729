//! Incremental UTF-8 validation of a line that arrives in several reads.

/// How much of a growing line buffer is known to be valid UTF-8.
///
/// Each read is validated while it is still in cache, so a line of tens of MB is not
/// walked a second time when it ends. Only the (at most 3-byte) incomplete sequence at
/// the end of a read is looked at again.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Utf8Progress {
    /// Length of the prefix known to be valid, ending on a character boundary.
    checked: usize,
    /// The line contains an invalid sequence (it will be decoded lossily).
    invalid: bool,
}

impl Utf8Progress {
    /// Validate the bytes appended to `line` since the last call.
    pub(super) fn advance(&mut self, line: &[u8]) {
        if self.invalid {
            return;
        }
        let tail = line.get(self.checked..).unwrap_or_default();
        // ASCII (JSON in practice) is checked faster than by the full validator.
        if tail.is_ascii() {
            self.checked = line.len();
            return;
        }
        match std::str::from_utf8(tail) {
            Ok(_) => self.checked = line.len(),
            // An incomplete sequence at the end: it may be completed by the next read.
            Err(error) if error.error_len().is_none() => self.checked += error.valid_up_to(),
            Err(_) => self.invalid = true,
        }
    }

    /// Length of the prefix known to be valid UTF-8 (it ends on a character boundary).
    pub(super) fn checked(&self) -> usize {
        self.checked
    }

    /// The first `n` bytes of the line (at most [`checked`](Self::checked)) were
    /// removed from its front.
    pub(super) fn consumed(&mut self, n: usize) {
        self.checked -= n.min(self.checked);
    }

    /// Whether the complete `line` is valid UTF-8, validating only the unchecked tail.
    pub(super) fn is_valid(&self, line: &[u8]) -> bool {
        !self.invalid && std::str::from_utf8(line.get(self.checked..).unwrap_or_default()).is_ok()
    }
}

//! Strings: their ends, escapes and text.

use std::borrow::Cow;

use super::{Result, SYNTAX, Scan};

impl<'a> Scan<'a> {
    /// A string; returns the span of its content and whether it has escapes.
    pub(super) fn string(&mut self) -> Result<(usize, usize, bool)> {
        self.eat(b'"')?;
        self.string_body()
    }

    /// A string's text, unescaped when needed; a slice of the input when it has no
    /// escapes (the usual case, handled inline).
    #[inline(always)]
    pub(super) fn string_text(&mut self) -> Result<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i;
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if self.b[end] == b'"' {
            self.i = end + 1;
            return self.t.get(start..end).map(Cow::Borrowed).ok_or(SYNTAX);
        }
        let span = self.string_body()?;
        self.text(span)
    }

    /// The rest of a string whose opening quote was just consumed.
    #[inline]
    pub(super) fn string_body(&mut self) -> Result<(usize, usize, bool)> {
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i = self.next_special(self.i).ok_or(SYNTAX)?;
            match self.b[self.i] {
                b'"' => {
                    let end = self.i;
                    self.i += 1;
                    return Ok((start, end, escaped));
                }
                b'\\' => escaped = true,
                _ => return Err(SYNTAX),
            }
            self.escape()?;
        }
    }

    /// [`Specials::next`](super::specials::Specials::next) in the input.
    #[inline(always)]
    pub(super) fn next_special(&mut self, from: usize) -> Option<usize> {
        self.specials.next(self.b, from)
    }

    /// One escape sequence; the scanner sits on its backslash.
    fn escape(&mut self) -> Result<()> {
        match self.b.get(self.i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 2,
            Some(b'u') => {
                let hex = self.b.get(self.i + 2..self.i + 6).ok_or(SYNTAX)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(SYNTAX);
                }
                self.i += 6;
            }
            _ => return Err(SYNTAX),
        }
        Ok(())
    }

    /// A string's text, unescaped when needed.
    pub(super) fn text(&self, (start, end, escaped): (usize, usize, bool)) -> Result<Cow<'a, str>> {
        if escaped {
            serde_json::from_slice::<String>(&self.b[start - 1..end + 1])
                .map(Cow::Owned)
                .map_err(|_| SYNTAX)
        } else {
            // Both ends are next to a quote: character boundaries of text already
            // checked, so slicing costs no second check.
            self.t.get(start..end).map(Cow::Borrowed).ok_or(SYNTAX)
        }
    }

    /// The position just past the closing quote of the string whose content starts at
    /// `from` (its opening quote just consumed); `self.i` is left as it was, unless the
    /// string has escapes.
    #[inline(always)]
    pub(super) fn string_end(&mut self, from: usize) -> Result<usize> {
        let end = self.next_special(from).ok_or(SYNTAX)?;
        if self.b.get(end) == Some(&b'"') {
            Ok(end + 1)
        } else {
            self.string_end_escaped(end)
        }
    }

    /// [`Self::string_end`] from the first backslash or control character of a string.
    #[inline(never)]
    pub(super) fn string_end_escaped(&mut self, at: usize) -> Result<usize> {
        self.i = at;
        self.string_body()?;
        Ok(self.i)
    }
}

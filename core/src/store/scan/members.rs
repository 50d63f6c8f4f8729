//! Containers and their members: brackets, member names, and the typed member values
//! the store reads (strings, versions, booleans).

use std::borrow::Cow;

use super::{MAX_DEPTH, Result, SCHEMA, SYNTAX, Scan, starts_with};

impl<'a> Scan<'a> {
    /// The opening bracket `open` of a container: one level deeper. Returns the state
    /// [`Self::more`] takes.
    #[inline(always)]
    pub(super) fn open(&mut self, open: u8) -> Result<bool> {
        self.eat(open)?;
        self.enter()?;
        Ok(true)
    }

    /// `null` (false), or the opening bracket `open` of a container (true, one level
    /// deeper); a well-formed value of another shape is a schema error.
    #[inline(always)]
    pub(super) fn optional_open(&mut self, open: u8) -> Result<bool> {
        // The usual case, the bracket itself, first.
        if self.b.get(self.i) == Some(&open) {
            self.i += 1;
            self.enter()?;
            return Ok(true);
        }
        if self.peek() == Some(b'n') {
            return self.literal(b"null").map(|()| false);
        }
        self.shape(open)?;
        self.open(open)
    }

    /// Whether another element of the open container that `close` closes comes next:
    /// true past its comma (or at the first element: `first`, from [`Self::open`]),
    /// false past the closing bracket (one level up).
    #[inline(always)]
    pub(super) fn more(&mut self, close: u8, first: &mut bool) -> Result<bool> {
        // The usual comma first.
        if !*first && self.b.get(self.i) == Some(&b',') {
            self.i += 1;
            return Ok(true);
        }
        match self.peek() {
            Some(c) if c == close => {
                self.i += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ if *first => {
                *first = false;
                Ok(true)
            }
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(SYNTAX),
        }
    }

    /// A member's name and its colon, as bytes (a slice of the input, or its unescaped
    /// text when it has escapes): matching it against the few names the store reads
    /// costs a length and a byte compare.
    #[inline(always)]
    fn name(&mut self) -> Result<Cow<'a, [u8]>> {
        self.eat(b'"')?;
        let (b, start) = (self.b, self.i);
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if starts_with(b, end, b"\":") {
            self.i = end + 2;
            return Ok(Cow::Borrowed(b.get(start..end).ok_or(SYNTAX)?));
        }
        let name = if b.get(end) == Some(&b'"') {
            self.i = end + 1;
            Cow::Borrowed(b.get(start..end).ok_or(SYNTAX)?)
        } else {
            self.escaped_name(start, end)?
        };
        self.eat(b':')?;
        Ok(name)
    }

    /// The name of the next member of the open object (`first`: none read yet, a
    /// constant at each call) and its colon, as [`Self::name`] reads it (an escaped name is
    /// unescaped into `buf`); `None` past the object's closing brace (one level up), as
    /// [`Self::more`] reads it. The usual compact `,"` (or `"` for the first member)
    /// and `":` around a name without escapes cost a two-byte compare each; anything
    /// else takes those two.
    #[inline(always)]
    pub(super) fn member<'s>(
        &mut self,
        first: bool,
        buf: &'s mut Vec<u8>,
    ) -> Result<Option<&'s [u8]>>
    where
        'a: 's,
    {
        let (b, i) = (self.b, self.i);
        let start = if !first && starts_with(b, i, b",\"") {
            i + 2
        } else if b.get(i) == Some(&b'}') {
            self.i = i + 1;
            self.depth -= 1;
            return Ok(None);
        } else if first && b.get(i) == Some(&b'"') {
            i + 1
        } else {
            return self.member_slow(first, buf);
        };
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if starts_with(b, end, b"\":") {
            self.i = end + 2;
            return Ok(Some(b.get(start..end).ok_or(SYNTAX)?));
        }
        // Back on the name's opening quote, for the general reading.
        self.i = start - 1;
        self.member_name(buf).map(Some)
    }

    /// [`Self::member`] past whitespace, or at the closing brace.
    #[inline(never)]
    fn member_slow<'s>(&mut self, mut first: bool, buf: &'s mut Vec<u8>) -> Result<Option<&'s [u8]>>
    where
        'a: 's,
    {
        if self.more(b'}', &mut first)? {
            self.member_name(buf).map(Some)
        } else {
            Ok(None)
        }
    }

    /// [`Self::name`], unescaped into `buf` if it has escapes.
    #[inline(never)]
    fn member_name<'s>(&mut self, buf: &'s mut Vec<u8>) -> Result<&'s [u8]>
    where
        'a: 's,
    {
        Ok(match self.name()? {
            Cow::Borrowed(name) => name,
            Cow::Owned(name) => {
                *buf = name;
                buf
            }
        })
    }

    /// The text of a name that starts at `start` and has a backslash or a control
    /// character at `at`.
    #[cold]
    #[inline(never)]
    fn escaped_name(&mut self, start: usize, at: usize) -> Result<Cow<'a, [u8]>> {
        self.i = at;
        let (_, end, _) = self.string_body()?;
        Ok(match self.text((start, end, true))? {
            Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
            Cow::Owned(text) => Cow::Owned(text.into_bytes()),
        })
    }

    /// An object, calling `member` with each key (the scanner sits before the value,
    /// which `member` must consume).
    #[cfg(test)]
    pub(super) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        let mut first = self.open(b'{')?;
        while self.more(b'}', &mut first)? {
            let key = self.string_text()?;
            self.eat(b':')?;
            member(self, key)?;
        }
        Ok(())
    }

    /// Expect a value of the shape `open`; a well-formed value of another shape is a
    /// schema error (after checking its syntax, as serde_json would have).
    pub(super) fn shape(&mut self, open: u8) -> Result<()> {
        match self.peek() {
            Some(c) if c == open => Ok(()),
            Some(_) => self.nested_value().and(Err(SCHEMA)),
            None => Err(SYNTAX),
        }
    }

    /// A compact `[]` within the depth limit, skipped (true); anything else is left
    /// for the general reading.
    #[inline(always)]
    pub(super) fn empty_array(&mut self) -> bool {
        let empty = starts_with(self.b, self.i, b"[]") && self.depth < MAX_DEPTH;
        if empty {
            self.i += 2;
        }
        empty
    }

    /// Whether the string on whose opening quote the scanner sits is `text`.
    #[inline(always)]
    pub(super) fn string_is(&mut self, text: &str) -> Result<bool> {
        let (b, start) = (self.b, self.i + 1);
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if b.get(end) == Some(&b'"') {
            self.i = end + 1;
            Ok(b.get(start..end) == Some(text.as_bytes()))
        } else {
            Ok(self.string_text()? == text)
        }
    }

    #[inline(always)]
    pub(super) fn string_value(&mut self) -> Result<Cow<'a, str>> {
        if self.b.get(self.i) != Some(&b'"') {
            self.shape(b'"')?;
        }
        self.string_text()
    }

    #[inline(always)]
    pub(super) fn u64_value(&mut self) -> Result<u64> {
        // The usual version: up to 19 digits (no overflow), not starting with 0, and no
        // fraction, exponent or digit after them.
        let (b, i) = (self.b, self.i);
        if let Some(&c @ b'1'..=b'9') = b.get(i) {
            let (mut n, mut j) = (u64::from(c - b'0'), i + 1);
            while j - i < 19
                && let Some(&c) = b.get(j)
                && c.is_ascii_digit()
            {
                n = n * 10 + u64::from(c - b'0');
                j += 1;
            }
            if !matches!(b.get(j), Some(b'0'..=b'9' | b'.' | b'e' | b'E')) {
                self.i = j;
                return Ok(n);
            }
        }
        self.u64_value_slow()
    }

    /// [`Self::u64_value`] of anything else.
    #[inline(never)]
    fn u64_value_slow(&mut self) -> Result<u64> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => {
                let (start, end) = self.number()?;
                // What `str::parse::<u64>` reads of a JSON number: digits only (no
                // sign, fraction or exponent), and no overflow.
                let digits = self.b.get(start..end).ok_or(SCHEMA)?;
                digits.iter().try_fold(0u64, |n, &c| {
                    if !c.is_ascii_digit() {
                        return Err(SCHEMA);
                    }
                    n.checked_mul(10)
                        .and_then(|n| n.checked_add(u64::from(c - b'0')))
                        .ok_or(SCHEMA)
                })
            }
            _ => self.nested_value().and(Err(SCHEMA)),
        }
    }

    #[inline(always)]
    pub(super) fn bool_or_null(&mut self) -> Result<bool> {
        let (b, i) = (self.b, self.i);
        if starts_with(b, i, b"false") {
            self.i = i + 5;
            return Ok(false);
        }
        self.bool_or_null_slow()
    }

    /// [`Self::bool_or_null`] of anything but a compact `false`.
    #[inline(never)]
    pub(super) fn bool_or_null_slow(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b't') => self.literal(b"true").map(|()| true),
            Some(b'f') => self.literal(b"false").map(|()| false),
            Some(b'n') => self.literal(b"null").map(|()| false),
            _ => self.nested_value().and(Err(SCHEMA)),
        }
    }
}

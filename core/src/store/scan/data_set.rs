//! A full data set, `{"flags":{…},"segments":{…}}` or an FDv1 `put` body around one,
//! scanned as a machine that can stop between items and resume later.
//!
//! [`split_all_data`](super::split_all_data) runs it over the whole text at once. A
//! stream reader can also run it over the part of a large `put` that has arrived so far
//! ([`DataSetScan::advance`]), while those bytes are still in the processor's caches,
//! and finish with the whole text once the event is complete
//! ([`DataSetScan::finish`]). Either way the result, errors included, is that of one
//! pass over the whole text: the scan commits a step (one member, or one item with its
//! key) only when it ended before the available text did, so a step cut short by the end
//! of the available text is simply run again later.

use bytes::Bytes;

use super::{Result, SCHEMA, SYNTAX, Scan};
use crate::store::{Change, Item, Kind};

/// An open object of the data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The `put` body: `{"path":…,"data":{…}}`.
    Envelope,
    /// The data set: `{"flags":{…},"segments":{…}}`.
    Data,
    /// The items of one kind: `{"KEY":{…},…}`.
    Items(Kind),
}

/// What the next step reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The outermost object's `{`.
    Open,
    /// A member: its name, colon and value (for an item: the whole item).
    Member,
    /// A `,` or the `}` closing the innermost open object.
    Separator,
    /// Nothing: the outermost object is closed (only whitespace may follow).
    Done,
}

/// Everything a step changes besides the output, copied to undo a step that did not
/// finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Control {
    next: Next,
    levels: [Level; 3],
    depth: usize,
    /// The envelope had a `data` member.
    data: bool,
    /// The data set being read had `flags` and `segments` members.
    flags: bool,
    segments: bool,
}

impl Control {
    fn top(&self) -> Level {
        self.levels[self.depth.saturating_sub(1).min(2)]
    }
}

/// The resumable scan of a data set; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataSetScan {
    envelope: bool,
    c: Control,
    /// Offset in the whole text of the next step.
    pos: usize,
    /// Items read so far, their raw JSON not attached yet: it is `spans[i]` of the whole
    /// text.
    changes: Vec<Change>,
    spans: Vec<(usize, usize)>,
    /// [`advance`](Self::advance) waits until the text is this long: a step that did not
    /// finish is tried again only once the text has grown by as much as that step read,
    /// so rereading costs at most as much again as reading.
    retry_at: usize,
    /// Invalid UTF-8 ahead: `advance` does nothing more (`finish` decides).
    stopped: bool,
}

impl DataSetScan {
    /// A scan of a data set, inside a `put` body's envelope if `envelope`.
    pub(crate) fn new(envelope: bool) -> Self {
        Self {
            envelope,
            c: Control {
                next: Next::Open,
                levels: [Level::Envelope; 3],
                depth: 0,
                data: false,
                flags: false,
                segments: false,
            },
            pos: 0,
            changes: Vec::new(),
            spans: Vec::new(),
            retry_at: 0,
            stopped: false,
        }
    }

    /// Bytes of the text read so far (committed steps).
    pub(crate) fn scanned(&self) -> usize {
        self.pos
    }

    /// Read what can be read of `prefix`, the text that has arrived so far. Each call's
    /// `prefix` must begin with the previous call's, and end up a prefix of the text
    /// passed to [`finish`](Self::finish). Never fails: whatever does not read well now
    /// is read again, and judged, by `finish`.
    pub(crate) fn advance(&mut self, prefix: &[u8]) {
        if self.stopped || self.c.next == Next::Done || prefix.len() < self.retry_at {
            return;
        }
        let Some(window) = prefix.get(self.pos..) else {
            self.stopped = true;
            return;
        };
        // The window may end inside a character, or reach invalid UTF-8 (which the SSE
        // layer replaces before the event is complete): read only its valid start.
        let valid = match simdutf8::compat::from_utf8(window) {
            Ok(text) => text,
            Err(error) => {
                self.stopped = error.error_len().is_some();
                let head = window.get(..error.valid_up_to()).unwrap_or_default();
                std::str::from_utf8(head).unwrap_or_default()
            }
        };
        let base = self.pos;
        let mut s = Scan::new(valid);
        s.depth = self.c.depth;
        while self.c.next != Next::Done {
            let (saved, items, start) = (self.c, self.changes.len(), s.i);
            let stepped = self.step(&mut s, base);
            if stepped.is_ok() && (self.c.next == Next::Done || s.peek().is_some()) {
                self.pos = base + s.i;
                continue;
            }
            // Cut short (or wrong, which `finish` will say): undo, wait for more text.
            self.c = saved;
            self.changes.truncate(items);
            self.spans.truncate(items);
            let tried = prefix.len() - (base + start);
            self.retry_at = prefix.len() + tried.max(1);
            return;
        }
    }

    /// Read the rest of `whole`, the complete text, and return the changes (raw JSON
    /// sliced from `whole`, no copy), or the error one pass over `whole` gives.
    pub(crate) fn finish(mut self, whole: &Bytes) -> Result<Vec<Change>> {
        let Some(rest) = whole.get(self.pos..) else {
            // Not the text that was advanced over: read it from the start.
            return Self::new(self.envelope).finish(whole);
        };
        // One UTF-8 check (vectorised) of what was not read yet; the start was valid.
        let text = simdutf8::basic::from_utf8(rest).map_err(|_| SYNTAX)?;
        let base = self.pos;
        let mut s = Scan::new(text);
        s.depth = self.c.depth;
        while self.c.next != Next::Done {
            self.step(&mut s, base)?;
        }
        s.end()?;
        for (change, &(start, end)) in self.changes.iter_mut().zip(&self.spans) {
            change.item.raw = whole.slice(start..end);
        }
        Ok(self.changes)
    }

    /// One step at the scanner's position; `base` is the scanner's offset in the text.
    fn step(&mut self, s: &mut Scan<'_>, base: usize) -> Result<()> {
        match self.c.next {
            Next::Open => {
                let root = if self.envelope {
                    Level::Envelope
                } else {
                    Level::Data
                };
                self.open(s, root)
            }
            Next::Member => {
                let name = s.string_text()?;
                s.eat(b':')?;
                match (self.c.top(), name.as_ref()) {
                    (Level::Envelope, "data") => {
                        self.c.data = true;
                        self.open(s, Level::Data)
                    }
                    (Level::Data, "flags") => {
                        self.c.flags = true;
                        self.open(s, Level::Items(Kind::Flag))
                    }
                    (Level::Data, "segments") => {
                        self.c.segments = true;
                        self.open(s, Level::Items(Kind::Segment))
                    }
                    (Level::Items(kind), _) => {
                        let key = name.into_owned();
                        s.peek();
                        let start = s.i;
                        let mut depends_on = Vec::new();
                        let (_, version, deleted) = s.item(kind, &mut depends_on)?;
                        self.changes.push(Change {
                            kind,
                            key,
                            item: Item {
                                version,
                                deleted,
                                raw: Bytes::new(),
                            },
                            depends_on,
                        });
                        self.spans.push((base + start, base + s.i));
                        self.c.next = Next::Separator;
                        Ok(())
                    }
                    _ => {
                        s.value()?;
                        self.c.next = Next::Separator;
                        Ok(())
                    }
                }
            }
            Next::Separator => match s.peek() {
                Some(b',') => {
                    s.i += 1;
                    self.c.next = Next::Member;
                    Ok(())
                }
                Some(b'}') => {
                    s.i += 1;
                    self.close(s)
                }
                _ => Err(SYNTAX),
            },
            Next::Done => Ok(()),
        }
    }

    /// An object of the shape `level` starts here (a value of another shape is a schema
    /// error, after its syntax is checked).
    fn open(&mut self, s: &mut Scan<'_>, level: Level) -> Result<()> {
        s.shape(b'{')?;
        s.eat(b'{')?;
        s.enter()?;
        self.c.levels[self.c.depth.min(2)] = level;
        self.c.depth += 1;
        if level == Level::Data {
            self.c.flags = false;
            self.c.segments = false;
        }
        if s.peek() == Some(b'}') {
            s.i += 1;
            return self.close(s);
        }
        self.c.next = Next::Member;
        Ok(())
    }

    /// The innermost open object just closed (its `}` consumed).
    fn close(&mut self, s: &mut Scan<'_>) -> Result<()> {
        let level = self.c.top();
        s.depth -= 1;
        self.c.depth -= 1;
        match level {
            Level::Items(_) => {}
            Level::Data if !(self.c.flags && self.c.segments) => return Err(SCHEMA),
            Level::Data => {}
            Level::Envelope if !self.c.data => return Err(SCHEMA),
            Level::Envelope => {}
        }
        self.c.next = if self.c.depth == 0 {
            Next::Done
        } else {
            Next::Separator
        };
        Ok(())
    }
}

#[cfg(test)]
#[path = "data_set_tests.rs"]
mod tests;

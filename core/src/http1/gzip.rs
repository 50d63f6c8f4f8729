//! Incremental gzip (RFC 1952) decoding with bounded output per step.
//!
//! The member header and trailer are parsed byte by byte here; the deflate data goes to
//! [`flate2::Decompress`] in raw mode. Each [`Gzip::decode`] call writes at most the
//! caller's `out_cap` bytes into a fixed scratch buffer, so a decompression bomb can never
//! allocate more than the scratch buffer, whatever a single input slice expands to.
//! Concatenated members are decoded one after another (RFC 1952 §2.2).

use flate2::{Crc, Decompress, FlushDecompress, Status};

use super::Error;

/// Size of the scratch buffer: the most decoded bytes one step produces.
pub(super) const SCRATCH_LEN: usize = 32 * 1024;

const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const FRESERVED: u8 = 0xe0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between members (or before the first): the body may end here.
    MemberStart,
    /// In the 10-byte fixed header, `len` bytes read.
    Fixed { len: u8, flags: u8 },
    /// In the 2-byte FEXTRA length, `len` bytes read.
    ExtraLen { flags: u8, len: u8, value: u16 },
    /// Skipping `remaining` FEXTRA bytes.
    Extra { flags: u8, remaining: u16 },
    /// Skipping the zero-terminated FNAME.
    Name { flags: u8 },
    /// Skipping the zero-terminated FCOMMENT.
    Comment { flags: u8 },
    /// Skipping the 2-byte header CRC.
    HeaderCrc { remaining: u8 },
    /// The header is complete; the deflate data starts with the next byte.
    DataStart,
    /// In the deflate data.
    Deflate,
    /// In the 8-byte trailer (CRC32, ISIZE), `len` bytes read.
    Trailer { len: u8 },
}

/// A streaming gzip decoder.
pub(super) struct Gzip {
    state: State,
    inflate: Decompress,
    crc: Crc,
    /// Decoded length of the current member, modulo 2^32 like ISIZE.
    size: u32,
    trailer: [u8; 8],
    scratch: Box<[u8]>,
}

impl std::fmt::Debug for Gzip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gzip")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Gzip {
    /// Create a decoder waiting for the first member.
    pub(super) fn new() -> Self {
        Self {
            state: State::MemberStart,
            inflate: Decompress::new(false),
            crc: Crc::new(),
            size: 0,
            trailer: [0; 8],
            scratch: vec![0; SCRATCH_LEN].into_boxed_slice(),
        }
    }

    /// Whether the input so far ends on a member boundary, so the body may end here.
    pub(super) fn at_boundary(&self) -> bool {
        self.state == State::MemberStart
    }

    /// Decode from the front of `input` until some output is produced, `input` is
    /// exhausted, or no progress is possible.
    ///
    /// Returns the number of input bytes consumed and the decoded bytes (at most
    /// `out_cap`, clamped to [`SCRATCH_LEN`]). Call with empty `input` to drain output
    /// the decompressor still holds.
    pub(super) fn decode(&mut self, input: &[u8], out_cap: usize) -> Result<(usize, &[u8]), Error> {
        let out_cap = out_cap.min(self.scratch.len());
        let mut pos = 0;
        loop {
            if self.state == State::DataStart {
                self.start_deflate();
            }
            if self.state == State::Deflate {
                let rest = input.get(pos..).unwrap_or_default();
                let out = self.scratch.get_mut(..out_cap).unwrap_or_default();
                let (in_before, out_before) = (self.inflate.total_in(), self.inflate.total_out());
                let status = self.inflate.decompress(rest, out, FlushDecompress::None);
                let consumed = usize::try_from(self.inflate.total_in() - in_before).unwrap_or(0);
                let produced = usize::try_from(self.inflate.total_out() - out_before).unwrap_or(0);
                let produced = produced.min(out_cap);
                let output = self.scratch.get(..produced).unwrap_or_default();
                self.crc.update(output);
                #[allow(
                    clippy::cast_possible_truncation,
                    reason = "ISIZE is the length modulo 2^32"
                )]
                {
                    self.size = self.size.wrapping_add(produced as u32);
                }
                pos += consumed;
                match status {
                    Ok(Status::StreamEnd) => self.state = State::Trailer { len: 0 },
                    Ok(Status::Ok | Status::BufError) => {}
                    // Output decoded before the corrupt data is still delivered.
                    Err(_) if produced > 0 => {}
                    Err(_) => return Err(Error::Gzip),
                }
                if produced > 0 || self.state == State::Deflate && consumed == 0 {
                    return Ok((pos, self.scratch.get(..produced).unwrap_or_default()));
                }
                continue;
            }
            let Some(&b) = input.get(pos) else {
                return Ok((pos, &[]));
            };
            pos += 1;
            self.state = self.header_or_trailer(b)?;
        }
    }

    /// The state after byte `b` of a header or trailer.
    fn header_or_trailer(&mut self, b: u8) -> Result<State, Error> {
        Ok(match self.state {
            State::MemberStart => self.fixed(0, 0, b)?,
            State::Fixed { len, flags } => self.fixed(len, flags, b)?,
            State::ExtraLen { flags, len: 0, .. } => State::ExtraLen {
                flags,
                len: 1,
                value: u16::from(b),
            },
            State::ExtraLen { flags, value, .. } => {
                let remaining = value | u16::from(b) << 8;
                if remaining == 0 {
                    after_extra(flags)
                } else {
                    State::Extra { flags, remaining }
                }
            }
            State::Extra { flags, remaining } => match remaining.saturating_sub(1) {
                0 => after_extra(flags),
                remaining => State::Extra { flags, remaining },
            },
            State::Name { flags } if b == 0 => after_name(flags),
            State::Comment { flags } if b == 0 => after_comment(flags),
            state @ (State::Name { .. } | State::Comment { .. }) => state,
            State::HeaderCrc { remaining: 1 } => State::DataStart,
            State::HeaderCrc { .. } => State::HeaderCrc { remaining: 1 },
            State::Trailer { len } => {
                if let Some(slot) = self.trailer.get_mut(usize::from(len)) {
                    *slot = b;
                }
                if len < 7 {
                    State::Trailer { len: len + 1 }
                } else {
                    self.check_trailer()?;
                    State::MemberStart
                }
            }
            state @ (State::DataStart | State::Deflate) => state,
        })
    }

    /// Byte `len` of the fixed header: ID1 ID2 CM FLG MTIME(4) XFL OS.
    fn fixed(&mut self, len: u8, flags: u8, b: u8) -> Result<State, Error> {
        let ok = match len {
            0 => b == 0x1f,
            1 => b == 0x8b,
            2 => b == 8,
            3 => b & FRESERVED == 0,
            _ => true,
        };
        if !ok {
            return Err(Error::Gzip);
        }
        let flags = if len == 3 { b } else { flags };
        Ok(match len {
            9 if flags & FEXTRA != 0 => State::ExtraLen {
                flags,
                len: 0,
                value: 0,
            },
            9 => after_extra(flags),
            _ => State::Fixed {
                len: len + 1,
                flags,
            },
        })
    }

    /// Check CRC32 and ISIZE of the member that just ended.
    fn check_trailer(&mut self) -> Result<(), Error> {
        let [c0, c1, c2, c3, s0, s1, s2, s3] = self.trailer;
        if u32::from_le_bytes([c0, c1, c2, c3]) != self.crc.sum()
            || u32::from_le_bytes([s0, s1, s2, s3]) != self.size
        {
            return Err(Error::Gzip);
        }
        Ok(())
    }

    /// Reset the per-member decoding state for the deflate data.
    fn start_deflate(&mut self) {
        self.inflate.reset(false);
        self.crc.reset();
        self.size = 0;
        self.state = State::Deflate;
    }
}

/// The state after FEXTRA: FNAME, FCOMMENT, FHCRC or the data.
fn after_extra(flags: u8) -> State {
    if flags & FNAME != 0 {
        State::Name { flags }
    } else {
        after_name(flags)
    }
}

/// The state after FNAME.
fn after_name(flags: u8) -> State {
    if flags & FCOMMENT != 0 {
        State::Comment { flags }
    } else {
        after_comment(flags)
    }
}

/// The state after FCOMMENT.
fn after_comment(flags: u8) -> State {
    if flags & FHCRC != 0 {
        State::HeaderCrc { remaining: 2 }
    } else {
        State::DataStart
    }
}

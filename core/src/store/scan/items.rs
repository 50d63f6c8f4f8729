//! Flags and segments: the fields the store reads of one item, and the single-item
//! entry points ([`decode`], FDv1 `patch` data, FDv2 `put-object` data).

use std::borrow::Cow;

use bytes::Bytes;

use super::{MAX_DEPTH, Result, SCHEMA, SYNTAX, Scan};
use crate::store::{DecodeError, Decoded, Item, Kind};

impl<'a> Scan<'a> {
    /// One flag or segment: its key (borrowed when it has no escapes; a data set names
    /// items by their map keys and drops it), version, deleted flag and references.
    pub(super) fn item(
        &mut self,
        kind: Kind,
        deps: &mut Vec<(Kind, String)>,
    ) -> Result<(Option<Cow<'a, str>>, u64, bool)> {
        let (mut key, mut version, mut deleted) = (None, None, false);
        if self.b.get(self.i) == Some(&b'{') {
            self.i += 1;
            self.enter()?;
        } else {
            self.shape(b'{')?;
            self.open(b'{')?;
        }
        let mut buf = Vec::new();
        let mut next = self.member(true, &mut buf)?;
        while let Some(name) = next {
            match name {
                b"key" => {
                    key = if self.peek() == Some(b'n') {
                        self.literal(b"null").map(|()| None)?
                    } else {
                        Some(self.string_value()?)
                    }
                }
                b"version" => version = Some(self.u64_value()?),
                b"deleted" => deleted = self.bool_or_null()?,
                b"prerequisites" if kind == Kind::Flag => {
                    if !self.empty_array() {
                        self.prerequisites(deps)?;
                    }
                }
                b"rules" => {
                    if !self.empty_array() {
                        self.rules(deps)?;
                    }
                }
                _ => self.value_with::<true>()?,
            }
            next = self.member(false, &mut buf)?;
        }
        let version = version.ok_or(SCHEMA)?;
        if deleted {
            deps.clear();
        } else if deps.len() > 1 {
            deps.sort_unstable();
            deps.dedup();
        }
        Ok((key, version, deleted))
    }

    /// A flag's prerequisites (`null` or an array of objects): their `key`s are flag
    /// references.
    fn prerequisites(&mut self, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        if !self.optional_open(b'[')? {
            return Ok(());
        }
        let mut first = true;
        while self.more(b']', &mut first)? {
            self.shape(b'{')?;
            self.open(b'{')?;
            let mut buf = Vec::new();
            let mut next = self.member(true, &mut buf)?;
            while let Some(name) = next {
                if name == b"key" {
                    let k = self.string_value()?;
                    deps.push((Kind::Flag, k.into_owned()));
                } else {
                    self.value()?;
                }
                next = self.member(false, &mut buf)?;
            }
        }
        Ok(())
    }

    /// An item's rules (`null` or an array of `null` or objects), for their clauses.
    fn rules(&mut self, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        if !self.optional_open(b'[')? {
            return Ok(());
        }
        let mut first = true;
        while self.more(b']', &mut first)? {
            if !self.optional_open(b'{')? {
                continue;
            }
            let mut buf = Vec::new();
            let mut next = self.member(true, &mut buf)?;
            while let Some(name) = next {
                if name != b"clauses" {
                    self.value()?;
                } else if self.optional_open(b'[')? {
                    let mut first = true;
                    while self.more(b']', &mut first)? {
                        self.clause(deps)?;
                    }
                }
                next = self.member(false, &mut buf)?;
            }
        }
        Ok(())
    }

    /// A rule clause (`null` or an object): the string `values` of a `segmentMatch`
    /// clause are segment references.
    fn clause(&mut self, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        let mut segment_match = None;
        let mut early: Vec<String> = Vec::new();
        if self.optional_open(b'{')? {
            let mut buf = Vec::new();
            let mut next = self.member(true, &mut buf)?;
            while let Some(name) = next {
                match name {
                    b"op" => {
                        segment_match = Some(if self.peek() == Some(b'"') {
                            self.string_is("segmentMatch")?
                        } else {
                            self.value()?;
                            false
                        });
                    }
                    b"values" if segment_match != Some(false) => {
                        if self.optional_open(b'[')? {
                            let mut first = true;
                            while self.more(b']', &mut first)? {
                                if self.peek() == Some(b'"') {
                                    let v = self.string_value()?.into_owned();
                                    match segment_match {
                                        Some(true) => deps.push((Kind::Segment, v)),
                                        _ => early.push(v),
                                    }
                                } else {
                                    self.value()?;
                                }
                            }
                        }
                    }
                    // Not a segment match: skipped, as the strings they usually are.
                    b"values" => self.strings_or_value()?,
                    _ => self.value()?,
                }
                next = self.member(false, &mut buf)?;
            }
        }
        if segment_match == Some(true) {
            deps.extend(early.into_iter().map(|v| (Kind::Segment, v)));
        }
        Ok(())
    }
}

/// Decode an item of `kind` from `raw`, keeping `raw` as the stored bytes.
///
/// One validating pass with no intermediate model: `key`, `version` and `deleted` are
/// read, prerequisite keys and `segmentMatch` values become [`Decoded::depends_on`],
/// everything else is checked and skipped.
pub fn decode(kind: Kind, raw: Bytes) -> std::result::Result<Decoded, DecodeError> {
    let text = std::str::from_utf8(&raw).map_err(|_| SYNTAX)?;
    let mut depends_on = Vec::new();
    let mut s = Scan::new(text);
    let (key, version, deleted) = s.item(kind, &mut depends_on)?;
    let key = key.map(Cow::into_owned);
    s.end()?;
    Ok(Decoded {
        key,
        item: Item {
            version,
            deleted,
            raw,
        },
        depends_on,
    })
}

/// The usual shape of FDv1 `patch` data, `{"path":"/KIND/KEY","data":{…}}`, in one
/// pass: the path, and the data decoded as an item of the kind `kind_of` reads from the
/// path (the data's raw JSON is a slice of `data`). `None` for anything else, valid or
/// not (other member orders, extra members, a path of no known kind, deep nesting,
/// any error): the caller's general parse then decides, errors included. When this
/// returns an item, the general parse would have returned the same one.
pub(crate) fn patch<'a>(
    data: &'a Bytes,
    kind_of: impl FnOnce(&str) -> Option<Kind>,
) -> Option<(Cow<'a, str>, Kind, Decoded)> {
    let mut s = Scan::new(std::str::from_utf8(data).ok()?);
    // Start half way down: deep data goes to the general parse, whose limit counts
    // the same levels differently.
    s.depth = MAX_DEPTH / 2;
    s.eat(b'{').ok()?;
    let member = |s: &mut Scan<'a>, name: &str| {
        let key = s.string().ok()?;
        (s.text(key).ok()?.as_ref() == name && s.eat(b':').is_ok()).then_some(())
    };
    member(&mut s, "path")?;
    let path = s.string_value().ok()?;
    let kind = kind_of(&path)?;
    s.eat(b',').ok()?;
    member(&mut s, "data")?;
    s.peek();
    let start = s.i;
    let mut depends_on = Vec::new();
    let (key, version, deleted) = s.item(kind, &mut depends_on).ok()?;
    let key = key.map(Cow::into_owned);
    let end = s.i;
    s.eat(b'}').ok()?;
    s.end().ok()?;
    let item = Item {
        version,
        deleted,
        raw: data.slice(start..end),
    };
    Some((
        path,
        kind,
        Decoded {
            key,
            item,
            depends_on,
        },
    ))
}

/// FDv2 `put-object` data, `{"version":…,"kind":…,"key":…,"object":{…}}`, in one pass:
/// the envelope's version and key, and the object decoded as an item of the kind
/// `kind_of` reads from `kind` (its raw JSON a slice of `data`). `None` for anything
/// else, valid or not (`object` before `kind`, a repeated member, a kind `kind_of` does
/// not know, deep nesting, any error): the caller's general parse then decides, errors
/// included. When this returns an item, the general parse would have returned the same.
pub(crate) fn put_object(
    data: &Bytes,
    kind_of: impl Fn(&str) -> Option<Kind>,
) -> Option<(u64, String, Kind, Decoded)> {
    let mut s = Scan::new(std::str::from_utf8(data).ok()?);
    // As for `patch`: deep data goes to the general parse.
    s.depth = MAX_DEPTH / 2;
    s.eat(b'{').ok()?;
    let (mut version, mut key, mut kind, mut object) = (None, None, None, None);
    loop {
        let name = s.string_text().ok()?;
        s.eat(b':').ok()?;
        match name.as_ref() {
            "version" if version.is_none() => version = Some(s.u64_value().ok()?),
            "key" if key.is_none() => key = Some(s.string_value().ok()?.into_owned()),
            "kind" if kind.is_none() => kind = Some(kind_of(&s.string_value().ok()?)?),
            "object" if object.is_none() => {
                let kind = kind?;
                s.peek();
                let start = s.i;
                let mut depends_on = Vec::new();
                let (key, version, deleted) = s.item(kind, &mut depends_on).ok()?;
                let key = key.map(Cow::into_owned);
                let item = Item {
                    version,
                    deleted,
                    raw: data.slice(start..s.i),
                };
                object = Some(Decoded {
                    key,
                    item,
                    depends_on,
                });
            }
            "version" | "key" | "kind" | "object" => return None,
            _ => s.value().ok()?,
        }
        match s.peek() {
            Some(b',') => s.i += 1,
            Some(b'}') => {
                s.i += 1;
                break;
            }
            _ => return None,
        }
    }
    s.end().ok()?;
    Some((version?, key?, kind?, object?))
}

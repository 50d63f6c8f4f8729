//! Percentage bucketing: SHA-1 of `prefix` (`key.salt.` or `seed.`, hashed ahead when
//! the flag was compiled) and the context's bucketing value; the first 15 hex digits
//! of the digest over 0xFFFFFFFFFFFFFFF, in `f32` as LaunchDarkly's SDKs compute it.

use crate::{AttributeRef, AttributeValue, Context, ContextKind as Kind, Reference};
use sha1::digest::generic_array::GenericArray;

/// `0xFFFFFFFFFFFFFFF` as `f32`.
const SCALE: f32 = 0x0FFF_FFFF_FFFF_FFFF_u64 as f32;

/// SHA-1's initial state.
const SHA1_INIT: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];

/// A bucketing prefix hashed ahead: SHA-1's state after the prefix's whole 64-byte
/// blocks, and the bytes after them. A bucket's digest starts from it, in a block on
/// the stack, padded by hand: no hasher cloned, no buffer machinery per evaluation.
#[derive(Clone)]
pub(crate) struct Prefix {
    state: [u32; 5],
    /// Bytes of the prefix already in `state`.
    hashed: u64,
    /// The rest of the prefix, `tail[..tail_len]`; zeros after it.
    tail: [u8; 64],
    tail_len: usize,
}

impl std::fmt::Debug for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefix")
            .field("len", &(self.hashed + self.tail_len as u64))
            .finish_non_exhaustive()
    }
}

fn compress(state: &mut [u32; 5], block: &[u8; 64]) {
    sha1::compress(state, std::slice::from_ref(GenericArray::from_slice(block)));
}

impl Prefix {
    /// The prefix `part.` for each part, in order (`key.salt.` or `seed.`).
    pub(crate) fn new(parts: &[&str]) -> Self {
        let mut p = Self {
            state: SHA1_INIT,
            hashed: 0,
            tail: [0; 64],
            tail_len: 0,
        };
        for part in parts {
            p.push(part.as_bytes());
            p.push(b".");
        }
        p
    }

    fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = bytes.len().min(64 - self.tail_len);
            self.tail[self.tail_len..self.tail_len + n].copy_from_slice(&bytes[..n]);
            self.tail_len += n;
            bytes = &bytes[n..];
            if self.tail_len == 64 {
                compress(&mut self.state, &self.tail);
                self.hashed += 64;
                self.tail = [0; 64];
                self.tail_len = 0;
            }
        }
    }

    /// The first 8 bytes of SHA-1(prefix ‖ `value`), as a big-endian number.
    pub(crate) fn digest_head(&self, mut value: &[u8]) -> u64 {
        let mut state = self.state;
        let mut block = self.tail;
        let mut fill = self.tail_len;
        let bits = (self.hashed + (self.tail_len + value.len()) as u64).wrapping_mul(8);
        while fill + value.len() >= 64 {
            let n = 64 - fill;
            block[fill..].copy_from_slice(&value[..n]);
            compress(&mut state, &block);
            value = &value[n..];
            fill = 0;
        }
        block[fill..fill + value.len()].copy_from_slice(value);
        fill += value.len();
        block[fill] = 0x80;
        block[fill + 1..].fill(0);
        if fill >= 56 {
            compress(&mut state, &block);
            block = [0; 64];
        }
        block[56..].copy_from_slice(&bits.to_be_bytes());
        compress(&mut state, &block);
        (u64::from(state[0]) << 32) | u64::from(state[1])
    }
}

/// Where a bucketing value came from.
pub(crate) enum Bucketed {
    /// A bucket in [0, 1) (0 also when the attribute is missing or not a string or an
    /// integer, as in Go).
    Value(f32),
    /// The context has no context of the rollout's kind: bucket 0, not in an experiment.
    MissingKind,
}

impl Bucketed {
    pub(crate) fn value(&self) -> f32 {
        match self {
            Self::Value(v) => *v,
            Self::MissingKind => 0.0,
        }
    }
}

/// The attribute a rollout buckets by.
#[derive(Debug)]
pub(crate) enum BucketBy {
    Key,
    Attr(Reference),
    /// An invalid reference: `MALFORMED_FLAG` when reached.
    Invalid,
}

/// The bucket of `context` for a rollout; `Err(())` for an invalid `bucketBy`.
pub(crate) fn bucket(
    context: &Context,
    kind: Option<&Kind>,
    by: &BucketBy,
    prefix: &Prefix,
) -> Result<Bucketed, ()> {
    let Some(c) = kind.and_then(|k| context.as_kind(k)) else {
        return match by {
            BucketBy::Invalid => Err(()),
            _ => Ok(Bucketed::MissingKind),
        };
    };
    let head = match by {
        BucketBy::Invalid => return Err(()),
        BucketBy::Key => prefix.digest_head(c.key().as_bytes()),
        BucketBy::Attr(r) => match c.attribute(r) {
            Some(AttributeRef::Str(s)) => prefix.digest_head(s.as_bytes()),
            Some(AttributeRef::Value(AttributeValue::String(s))) => {
                prefix.digest_head(s.as_bytes())
            }
            Some(AttributeRef::Value(&AttributeValue::Number(n)))
                if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 =>
            {
                prefix.digest_head((n as i64).to_string().as_bytes())
            }
            _ => return Ok(Bucketed::Value(0.0)),
        },
    };
    // The first 15 hex digits: the top 60 bits.
    Ok(Bucketed::Value((head >> 4) as f32 / SCALE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContextBuilder, Reference};

    use sha1::{Digest, Sha1};

    fn prefix(s: &str) -> Prefix {
        let mut p = Prefix::new(&[]);
        p.push(s.as_bytes());
        p
    }

    #[test]
    fn the_digest_is_sha1_for_every_length_around_the_block_edges() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for p in [0, 1, 20, 52, 55, 56, 63, 64, 65, 119, 127, 128, 130] {
            let pre = prefix(std::str::from_utf8(&[b'k'; 200][..p]).unwrap());
            for v in 0..150 {
                let mut sha = Sha1::new();
                sha.update(&[b'k'; 200][..p]);
                sha.update(&bytes[..v]);
                let want = sha.finalize();
                let mut head = [0u8; 8];
                head.copy_from_slice(&want[..8]);
                assert_eq!(
                    pre.digest_head(&bytes[..v]),
                    u64::from_be_bytes(head),
                    "{p} + {v}"
                );
            }
        }
        let parts = Prefix::new(&["flag-key", "salt"]);
        assert_eq!(
            parts.digest_head(b"user"),
            prefix("flag-key.salt.").digest_head(b"user")
        );
    }

    #[test]
    fn buckets_as_the_sdks_do() {
        // The values of LaunchDarkly's SDK tests (hashKey "hashKey", salt "saltyA").
        let user = |k: &str| ContextBuilder::new(k).build().unwrap();
        let p = prefix("hashKey.saltyA.");
        let b = |k| {
            bucket(&user(k), Some(&Kind::user()), &BucketBy::Key, &p)
                .unwrap()
                .value()
        };
        assert!((b("userKeyA") - 0.421_575_87).abs() < 1e-7);
        assert!((b("userKeyB") - 0.670_848_5).abs() < 1e-7);
        assert!((b("userKeyC") - 0.103_431_06).abs() < 1e-7);

        let mut c = ContextBuilder::new("userKeyD");
        c.set_float("intAttr", 33_333.0);
        c.set_float("floatAttr", 999.999);
        let c = c.build().unwrap();
        let by = |a| BucketBy::Attr(Reference::new(a));
        let v = bucket(&c, Some(&Kind::user()), &by("intAttr"), &p)
            .unwrap()
            .value();
        assert!((v - 0.547_714_23).abs() < 1e-7, "{v}");
        let v = bucket(&c, Some(&Kind::user()), &by("floatAttr"), &p)
            .unwrap()
            .value();
        assert_eq!(v, 0.0);
        let org = Kind::try_from("org").unwrap();
        assert!(matches!(
            bucket(&c, Some(&org), &BucketBy::Key, &p),
            Ok(Bucketed::MissingKind)
        ));
        assert!(bucket(&c, Some(&Kind::user()), &BucketBy::Invalid, &p).is_err());
    }
}

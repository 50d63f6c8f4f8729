//! Percentage bucketing: SHA-1 of `prefix` (`key.salt.` or `seed.`, hashed ahead when
//! the flag was compiled) and the context's bucketing value; the first 15 hex digits
//! of the digest over 0xFFFFFFFFFFFFFFF, in `f32` as LaunchDarkly's SDKs compute it.

use crate::eval::{AttributeRef, AttributeValue, Context, ContextKind as Kind};
use sha1::{Digest, Sha1};

use super::compile::BucketBy;

/// `0xFFFFFFFFFFFFFFF` as `f32`.
const SCALE: f32 = 0x0FFF_FFFF_FFFF_FFFF_u64 as f32;

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

/// The bucket of `context` for a rollout; `Err(())` for an invalid `bucketBy`.
pub(crate) fn bucket(
    context: &Context,
    kind: Option<&Kind>,
    by: &BucketBy,
    prefix: &Sha1,
) -> Result<Bucketed, ()> {
    let Some(c) = kind.and_then(|k| context.as_kind(k)) else {
        return match by {
            BucketBy::Invalid => Err(()),
            _ => Ok(Bucketed::MissingKind),
        };
    };
    let mut sha = prefix.clone();
    match by {
        BucketBy::Invalid => return Err(()),
        BucketBy::Key => sha.update(c.key().as_bytes()),
        BucketBy::Attr(r) => match c.attribute(r) {
            Some(AttributeRef::Str(s)) => sha.update(s.as_bytes()),
            Some(AttributeRef::Value(AttributeValue::String(s))) => sha.update(s.as_bytes()),
            Some(AttributeRef::Value(&AttributeValue::Number(n)))
                if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 =>
            {
                sha.update((n as i64).to_string().as_bytes());
            }
            _ => return Ok(Bucketed::Value(0.0)),
        },
    }
    let digest = sha.finalize();
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    // The first 15 hex digits: the top 60 bits.
    let n = u64::from_be_bytes(head) >> 4;
    Ok(Bucketed::Value(n as f32 / SCALE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{ContextBuilder, Reference};

    fn prefix(s: &str) -> Sha1 {
        let mut sha = Sha1::new();
        sha.update(s.as_bytes());
        sha
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

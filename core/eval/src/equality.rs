//! Whether two contexts are the same context.

use crate::Context;
use serde_json::Value;

/// True when `a` and `b` are the same context: the same kinds, and for each kind the same
/// key, name, anonymity, attributes and set of private attributes. Unlike `==`, which
/// compares the order in which private attributes were added, the order of attributes,
/// private attributes and of the kinds of a multi-kind context does not matter, and an
/// attribute marked private by name equals the same attribute marked by its reference.
///
/// ```
/// use flagsync_eval::{ContextBuilder, same_context};
///
/// let a = ContextBuilder::new("k").add_private_attribute("name").add_private_attribute("/a/b").build()?;
/// let b = ContextBuilder::new("k").add_private_attribute("/a/b").add_private_attribute("name").build()?;
/// assert!(same_context(&a, &b));
/// assert_ne!(a, b); // `==` compares the order they were added in
/// # Ok::<(), String>(())
/// ```
pub fn same_context(a: &Context, b: &Context) -> bool {
    normalized(a) == normalized(b)
}

/// The context's JSON with every list of private attributes sorted (objects compare
/// as maps).
fn normalized(context: &Context) -> Option<Value> {
    let mut json = serde_json::to_value(context).ok()?;
    if context.is_multi() {
        if let Value::Object(kinds) = &mut json {
            kinds.values_mut().for_each(sort_private);
        }
    } else {
        sort_private(&mut json);
    }
    Some(json)
}

fn sort_private(single: &mut Value) {
    if let Some(Value::Array(private)) = single.pointer_mut("/_meta/privateAttributes") {
        private.sort_by(|x, y| x.as_str().cmp(&y.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContextBuilder, MultiContextBuilder};

    fn single(kind: &str, key: &str, private: &[&str]) -> Context {
        let mut b = ContextBuilder::new(key);
        b.kind(kind).set_string("name", "n");
        for p in private {
            b.add_private_attribute(*p);
        }
        b.build().expect("valid")
    }

    #[test]
    fn private_attribute_order_does_not_matter() {
        let a = single("user", "k", &["name", "/address/street"]);
        let b = single("user", "k", &["/address/street", "name"]);
        assert!(same_context(&a, &b));
        assert!(!same_context(&a, &single("user", "k", &["name"])));
        assert!(!same_context(&a, &single("user", "k", &[])));
        assert!(!same_context(
            &a,
            &single("org", "k", &["name", "/address/street"])
        ));
    }

    #[test]
    fn multi_kind_order_does_not_matter() {
        let user = single("user", "u", &[]);
        let org = single("org", "o", &["name"]);
        let ab = MultiContextBuilder::of(vec![user.clone(), org.clone()])
            .build()
            .expect("multi");
        let ba = MultiContextBuilder::of(vec![org, user.clone()])
            .build()
            .expect("multi");
        assert!(same_context(&ab, &ba));
        let other = MultiContextBuilder::of(vec![user, single("org", "o", &[])])
            .build()
            .expect("multi");
        assert!(!same_context(&ab, &other));
    }
}

#!/usr/bin/env bash
# Self-test of .ci/import-cycles.py: a tiny fake crate with known circles and
# known non-circles, checked under each option.  Exit 0 when every check passes.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
tool="$here/import-cycles.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0

mkdir -p "$tmp/src/hub" "$tmp/target/src"
printf '[package]\nname = "fake-crate"\nversion = "0.1.0"\n' > "$tmp/Cargo.toml"

# lib.rs: a root circle with d.rs (lib.rs names d::Dee, d.rs imports crate::Client);
# `pub use d::D` and `pub use hub::Thing` are pure re-exports.
cat > "$tmp/src/lib.rs" <<'EOF'
mod a;
mod b;
mod d;
mod hub;
#[path = "elsewhere.rs"]
mod moved;
pub use d::D;
pub use hub::Thing;
pub struct Client;
pub fn make() -> d::Dee { d::Dee(Client) }
EOF
# a.rs <-> b.rs: the known circle (grouped use with a rename one way, a code path back).
cat > "$tmp/src/a.rs" <<'EOF'
use crate::{b::{self, B as Bee}, moved::Far};
pub struct A(pub Bee, pub Far);
pub fn g() { b::h(); }
EOF
cat > "$tmp/src/b.rs" <<'EOF'
pub struct B;
pub fn h() {}
pub fn f() -> crate::a::A { todo!() }
EOF
cat > "$tmp/src/d.rs" <<'EOF'
use crate::Client;
pub struct D;
pub struct Dee(pub Client);
EOF
cat > "$tmp/src/elsewhere.rs" <<'EOF'
/* crate::a::A in a /* nested */ comment */
pub struct Far(pub &'static str);
pub const S: &str = r#"crate::b::B "quoted""#;
EOF
# hub: the re-export-only non-circle.  user.rs imports `super::Thing`, which hub/mod.rs
# only re-exports from inner.rs, so the edge goes to inner.rs and mod.rs -> user.rs makes
# no circle.  conf.rs names `super::Config` (defined in mod.rs): a circle only when the
# pure re-export `pub use conf::Setting` counts (--count-reexports).  The test module in
# inner.rs and hub/tests.rs would make circles if test code counted.
cat > "$tmp/src/hub/mod.rs" <<'EOF'
mod conf;
mod inner;
mod user;
pub use conf::Setting;
pub use inner::Thing;
pub struct Config;
pub fn run() { let _ = user::helper(); }
#[cfg(test)]
mod tests;
EOF
cat > "$tmp/src/hub/conf.rs" <<'EOF'
pub struct Setting(pub super::Config);
EOF
cat > "$tmp/src/hub/inner.rs" <<'EOF'
pub struct Thing;
#[cfg(test)]
mod tests {
    use crate::hub::user::helper;
}
EOF
cat > "$tmp/src/hub/user.rs" <<'EOF'
use super::Thing;
pub fn helper() -> Thing { Thing }
EOF
cat > "$tmp/src/hub/tests.rs" <<'EOF'
use super::run;
EOF
cp "$tmp/Cargo.toml" "$tmp/target/Cargo.toml"          # target/ is skipped
cp "$tmp/src/a.rs" "$tmp/target/src/lib.rs"

# check NAME WANT_RC WANT_OUTPUT_LINES... -- ARGS...: the circle/summary lines must be exactly these.
check() {
    local name="$1" want_rc="$2"; shift 2
    local want=""
    while [ "$1" != "--" ]; do want+="$1"$'\n'; shift; done
    shift
    local out rc
    out="$(python3 "$tool" --root "$tmp" "$@")"; rc=$?
    local got; got="$(printf '%s\n' "$out" | grep -v '^    ')"$'\n'
    if [ "$rc" = "$want_rc" ] && [ "$got" = "$want" ]; then
        echo "ok   $name"
    else
        echo "FAIL $name (exit $rc, want $want_rc)"; printf '%s\n' "$out" | sed 's/^/     | /'
        fails=$((fails + 1))
    fi
}

check "default: a<->b and the root circle" 1 \
    "src/a.rs <-> src/b.rs" "src/d.rs <-> src/lib.rs" "2 import circle(s) (9 files in 1 crates)" --
check "--allow-root: a<->b only" 1 \
    "src/a.rs <-> src/b.rs" "1 import circle(s) (9 files in 1 crates)" -- --allow-root
check "--count-reexports: hub/conf.rs <-> mod.rs too" 1 \
    "src/a.rs <-> src/b.rs" "src/d.rs <-> src/lib.rs" "src/hub/conf.rs <-> src/hub/mod.rs" \
    "3 import circle(s) (9 files in 1 crates)" -- --count-reexports
out="$(python3 "$tool" --root "$tmp" --verbose)"
for edge in "src/a.rs:1 -> src/b.rs  use crate::b::B" "src/a.rs:1 -> src/elsewhere.rs  use crate::moved::Far" \
    "src/hub/user.rs:1 -> src/hub/inner.rs  use super::Thing" "src/b.rs:3 -> src/a.rs  crate::a::A"; do
    if printf '%s\n' "$out" | grep -qxF "edge $edge"; then echo "ok   edge $edge"
    else echo "FAIL edge $edge missing"; fails=$((fails + 1)); fi
done
if printf '%s\n' "$out" | grep -q -e 'elsewhere.rs:[0-9]* ->' -e 'hub/mod.rs:[0-9]* -> src/hub/inner' -e 'hub/mod.rs:[0-9]* -> src/hub/conf' -e 'tests'; then
    echo "FAIL comment, string, pure re-export or test code made an edge"
    printf '%s\n' "$out" | grep -e 'elsewhere.rs:[0-9]* ->' -e 'hub/mod.rs:[0-9]* -> src/hub/inner' -e 'hub/mod.rs:[0-9]* -> src/hub/conf' -e 'tests'
    fails=$((fails + 1))
fi

# Break the a<->b circle: b.rs no longer names a (only a comment and a string do).
cat > "$tmp/src/b.rs" <<'EOF'
pub struct B;
pub fn h() {}
// pub fn f() -> crate::a::A
pub const T: &str = "crate::a::A";
EOF
check "fixed, --allow-root: no circle" 0 "no import circles (9 files in 1 crates)" -- --allow-root
check "fixed, default: the root circle stays" 1 \
    "src/d.rs <-> src/lib.rs" "1 import circle(s) (9 files in 1 crates)" --

[ "$fails" = 0 ] && echo "import-cycles self-test: all passed" || echo "import-cycles self-test: $fails failed"
exit $((fails > 0))

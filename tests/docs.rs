//! The API documentation builds without warnings: math in square brackets (J[h], H[dW]) is
//! escaped so rustdoc does not read it as an intra-doc link, and every link resolves.

use std::process::Command;

#[test]
fn cargo_doc_has_no_warnings() {
    let root = env!("CARGO_MANIFEST_DIR");
    // its own target folder: the test's own build holds the lock of the default one
    let out = Command::new(env!("CARGO"))
        .args(["doc", "--no-deps", "--lib", "--offline"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .env("CARGO_TARGET_DIR", format!("{root}/target/doc-lint"))
        .current_dir(root)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo doc failed or warned:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

//! `weft index` over a hostile tree, as a user runs it: binary and
//! non-UTF-8 files, a file over the size limit, empty and unparsable files,
//! a symlink loop, a symlink out of the tree, a FIFO, an unreadable file,
//! names with control characters or invalid UTF-8. Each is reported with
//! its reason (text and `--json`), the run ends (no FIFO hangs it) and
//! exits 0, everything else is indexed; a second run after the files are
//! fixed indexes them and loses nothing indexed before.

#![cfg(unix)]

use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{json, model_dir};

/// The size limit of the run: small, so the huge file stays cheap to make.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Runs weft on `data`; fails the test if it has not ended in five minutes
/// (a FIFO opened for reading blocks until a writer comes: forever).
fn weft(args: &[&str], data: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env("WEFT__CHUNKING__MAX_FILE_BYTES", MAX_FILE_BYTES.to_string())
        .env_remove("WEFT__RERANK__KIND")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weft runs");
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().expect("wait for weft").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("weft's output");
            panic!(
                "weft {args:?} hung (killed after 5 minutes): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("weft's output")
}

fn write(root: &Path, name: &str, bytes: &[u8]) {
    let path = root.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The reason `list` (the summary's `errors` or `skipped`) gives for `uri`.
fn reason<'a>(run: &'a Value, list: &str, uri: &str) -> &'a str {
    run[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["uri"] == uri)
        .and_then(|i| i["reason"].as_str())
        .unwrap_or_else(|| panic!("{uri} is not in {list}: {run:#}"))
}

fn text_hits(query: &str, data: &Path) -> Vec<String> {
    let out = json(&weft(
        &[
            "search",
            query,
            "--mode",
            "text",
            "--no-expand",
            "--json",
            "--project",
            "hostile",
        ],
        data,
    ));
    out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_hostile_tree_is_indexed_around_its_traps_and_a_fixed_one_completes() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.md"),
        "# Secret\n\nThe launch code is swordfish-aurora.\n",
    )
    .unwrap();
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    write(
        root,
        "src/Greeter.java",
        b"package demo;\n\n/** Greets people by name, politely. */\npublic class Greeter {\n  public String greet(String name) {\n    return \"Hello, \" + name;\n  }\n}\n",
    );
    write(
        root,
        "docs/guide.md",
        b"# Guide\n\nThe greeter answers every visitor with a ceremonious salutation.\n",
    );
    write(root, "empty.md", b"");
    write(
        root,
        "broken.py",
        b"def (((:\n    return ]]] {{{\nclass\n\x20\x20 lambda lambda ::: unparsable\n",
    );
    write(
        root,
        "assets/logo.png",
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10",
    );
    write(root, "notes/latin1.txt", b"caf\xe9 cr\xe8me br\xfbl\xe9e\n");
    let huge = vec![b'a'; MAX_FILE_BYTES as usize + 4096];
    write(root, "huge.txt", &huge);
    write(
        root,
        "locked.md",
        b"# Locked\n\nOnly the owner reads this vault.\n",
    );
    std::fs::set_permissions(
        root.join("locked.md"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    // Root reads a file whatever its mode: then it is simply indexed.
    let locked_readable = std::fs::read(root.join("locked.md")).is_ok();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), root.join("leak.md")).unwrap();
    std::os::unix::fs::symlink("..", root.join("src/up")).unwrap(); // a loop
    let made = Command::new("mkfifo")
        .arg(root.join("pipe.md"))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    write(
        root,
        "evil\nname.md",
        b"# Forged\n\nA name with a line break.\n",
    );
    std::fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"caf\xe9.md")),
        "# Cafe\n\nA name in Latin-1.\n",
    )
    .unwrap();

    let data = tempfile::tempdir().unwrap();
    let path = root.to_str().unwrap();
    let out = weft(
        &["index", path, "--project", "hostile", "--json"],
        data.path(),
    );
    let summary = json(&out);
    let run = &summary["runs"][0];
    assert_eq!(summary["failed"], serde_json::json!([]), "{summary:#}");

    // Indexed: the good files, the empty one (no chunks), the unparsable
    // one (as line windows) and, for root, the locked one.
    let indexed = if locked_readable { 5 } else { 4 };
    assert_eq!(run["documents_indexed"], indexed, "{run:#}");
    // Each trap is reported with its reason.
    assert!(reason(run, "skipped", "assets/logo.png").contains("binary file"));
    assert!(reason(run, "skipped", "notes/latin1.txt").contains("not valid UTF-8"));
    assert!(reason(run, "skipped", "leak.md").contains("outside the tree: not followed"));
    assert!(reason(run, "skipped", "pipe.md").contains("FIFO"));
    assert!(reason(run, "skipped", "evil\\nname.md").contains("control character (U+000A)"));
    assert!(reason(run, "skipped", "caf\u{fffd}.md").contains("not valid UTF-8"));
    assert!(reason(run, "errors", "huge.txt").contains("over chunking.max_file_bytes"));
    let looped = run["errors"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["uri"].as_str().unwrap().starts_with("src/up"));
    assert!(looped, "the loop is reported: {run:#}");
    if !locked_readable {
        assert!(reason(run, "errors", "locked.md").contains("Permission denied"));
    }
    assert_eq!(run["documents_skipped"], 6, "{run:#}");

    // What was indexed is found; what lay outside the tree is not.
    assert_eq!(
        text_hits("ceremonious salutation", data.path()),
        ["docs/guide.md"]
    );
    assert!(text_hits("swordfish aurora launch code", data.path()).is_empty());

    // The same run as a person reads it: every trap named, with its reason.
    let data_text = tempfile::tempdir().unwrap();
    let out = weft(&["index", path, "--project", "hostile"], data_text.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "skipped  assets/logo.png: binary file",
        "skipped  pipe.md: a FIFO (named pipe), not a regular file: not read",
        "skipped  leak.md: a symlink to",
        "skipped  evil\\nname.md: its path holds a control character (U+000A)",
        "error    huge.txt:",
    ] {
        assert!(text.contains(line), "{line:?} is not in:\n{text}");
    }

    // Fix the files, run again: they come in, nothing indexed before goes.
    std::fs::set_permissions(
        root.join("locked.md"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    write(root, "notes/latin1.txt", "café crème brûlée\n".as_bytes());
    write(
        root,
        "huge.txt",
        b"A small file about tidal almanacs now.\n",
    );
    std::fs::remove_file(root.join("pipe.md")).unwrap();
    write(
        root,
        "pipe.md",
        b"# Pipe\n\nA plain file where the pipe was.\n",
    );
    let second = json(&weft(
        &["index", path, "--project", "hostile", "--json"],
        data.path(),
    ));
    let run = &second["runs"][0];
    assert_eq!(run["documents_deleted"], 0, "{run:#}");
    let fixed = if locked_readable { 3 } else { 4 };
    assert_eq!(run["documents_indexed"], fixed, "{run:#}");
    // Unchanged: the good files, the empty and unparsable ones, the binary
    // one (recorded as skipped) and, for root, the locked one.
    let unchanged = if locked_readable { 6 } else { 5 };
    assert_eq!(run["documents_unchanged"], unchanged, "{run:#}");
    assert_eq!(text_hits("tidal almanacs", data.path()), ["huge.txt"]);
    assert_eq!(text_hits("brûlée", data.path()), ["notes/latin1.txt"]);
    assert_eq!(text_hits("vault owner", data.path()), ["locked.md"]);
    assert_eq!(
        text_hits("ceremonious salutation", data.path()),
        ["docs/guide.md"]
    );
}

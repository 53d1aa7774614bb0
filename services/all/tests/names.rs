//! `weft-all` runs the program it is called by: each name through a link,
//! with that program's own version line and exit status, and another name
//! refused with the list of names.

use std::process::Command;

#[test]
fn each_name_runs_its_program_and_another_is_refused() {
    let all = env!("CARGO_BIN_EXE_weft-all");
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "weft",
        "weft-crawler",
        "weft-chunker",
        "weft-embedder",
        "weft-query",
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(all, &link).unwrap();
        let out = Command::new(&link).arg("--version").output().unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        let version = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            version.trim(),
            format!("{name} {}", env!("CARGO_PKG_VERSION")),
            "{name}"
        );
        // Its own arguments: an unknown flag is its parser's usage error.
        let out = Command::new(&link).arg("--no-such-flag").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("Usage: {name}")),
            "{name}: {stderr}"
        );
    }
    let out = Command::new(all).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("weft-query") && stderr.contains("\"weft-all\""),
        "{stderr}"
    );
}

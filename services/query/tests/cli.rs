//! The binary's help and its start-up errors.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft-query"))
}

#[test]
fn help_names_the_options() {
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("--listen") && text.contains("--data-dir"),
        "{text}"
    );
}

#[test]
fn errors_name_the_key_or_the_directory() {
    let out = bin()
        .env("WEFT__QUERY__LISTEN", "nowhere")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("query.listen"));
    let empty = tempfile::tempdir().unwrap();
    let out = bin().arg("--data-dir").arg(empty.path()).output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains(&empty.path().display().to_string()), "{text}");
}

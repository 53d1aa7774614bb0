//! The binary's help, its argument and manifest errors.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft-crawler"))
}

#[test]
fn help_names_the_options() {
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for option in ["--manifest", "--reindex", "--json", "--nats-url"] {
        assert!(text.contains(option), "{option}: {text}");
    }
}

#[test]
fn nothing_to_crawl_is_an_error() {
    let out = bin().output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to crawl"));
}

#[test]
fn manifest_errors_name_the_file_and_entry() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("sources.toml");
    std::fs::write(
        &manifest,
        "[[sources]]\nsource = \"does-not-exist\"\nproject = \"x\"\n",
    )
    .unwrap();
    let out = bin().arg("--manifest").arg(&manifest).output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("sources.toml") && text.contains("sources[0].source"),
        "{text}"
    );
    std::fs::write(&manifest, "[[sources]]\nsorce = \"x\"\n").unwrap();
    let out = bin().arg("--manifest").arg(&manifest).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("sources.toml") && text.contains("sorce"),
        "{text}"
    );
    // Branches: only of a git repository, and only names git allows.
    for (entry, expected) in [
        (
            format!(
                "source = {:?}\nbranches = [\"next\"]",
                dir.path().display().to_string()
            ),
            "sources[0].branches: only a git repository has branches",
        ),
        (
            "source = \"https://git.example/a.git\"\nbranches = [\"ok\", \"--upload-pack=x\"]"
                .to_owned(),
            "sources[0].branches[1]: \"--upload-pack=x\"",
        ),
        (
            "source = \"https://git.example/a.git\"\nproject = \"a@next\"".to_owned(),
            "names a branch overlay",
        ),
    ] {
        std::fs::write(&manifest, format!("[[sources]]\n{entry}\n")).unwrap();
        let out = bin().arg("--manifest").arg(&manifest).output().unwrap();
        assert!(!out.status.success());
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(expected), "{entry}: {text}");
    }
}

//! `weft chunk` as a user runs it: a real process over a real directory.

use std::path::Path;
use std::process::{Command, Output};

fn weft(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(cwd)
        .env_remove("WEFT__CHUNKING__CODE__MAX_CHARS")
        .output()
        .expect("weft runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small repository with the awkward cases a real one has.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("src/util")).unwrap();
    std::fs::create_dir_all(root.join("build")).unwrap();
    std::fs::write(root.join(".gitignore"), "build/\n*.log\n").unwrap();
    std::fs::write(
        root.join("src/Main.java"),
        "package a;\n\n/** Entry point. */\npublic class Main {\n  public static void main(String[] args) {\n    System.out.println(\"hi\");\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/util/strings.ts"),
        "/** Pads. */\nexport function pad(s: string): string {\n  return ` ${s} `;\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "# Demo\n\nA demo repository.\n").unwrap();
    std::fs::write(root.join("build/Generated.java"), "class Generated {}\n").unwrap();
    std::fs::write(root.join("debug.log"), "ignored\n").unwrap();
    std::fs::write(root.join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    std::fs::write(root.join("latin1.txt"), b"caf\xe9\n").unwrap();
    std::fs::write(root.join("empty.py"), b"").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("..", root.join("src/util/loop")).unwrap();
    dir
}

#[test]
fn json_lists_files_chunks_and_skipped_files_with_reasons() {
    let dir = tree();
    let out = weft(&["chunk", ".", "--json", "--project", "demo"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(json["project"], "demo");
    let uris: Vec<&str> = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        vec![
            "README.md",
            "empty.py",
            "src/Main.java",
            "src/util/strings.ts"
        ]
    );

    let main = &json["files"][2];
    assert_eq!(main["language"], "java");
    let chunk = &main["chunks"][0];
    for field in [
        "document_id",
        "chunk_index",
        "total_chunks",
        "project",
        "uri",
        "title",
        "section",
        "content_type",
        "language",
        "node_type",
        "node_name",
        "start_line",
        "end_line",
        "start_byte",
        "end_byte",
        "content",
        "content_hash",
        "is_index_doc",
        "embedding_format",
    ] {
        assert!(chunk.get(field).is_some(), "chunk JSON lacks {field}");
    }
    assert_eq!(chunk["section"], "Main");
    assert_eq!(
        chunk["document_id"],
        weft_core::DocumentId::new("demo", "src/Main.java").as_str()
    );
    assert_eq!(json["files"][0]["is_index_doc"], true);
    assert_eq!(
        json["files"][1]["chunks"].as_array().unwrap().len(),
        0,
        "an empty file has no chunks"
    );

    let skipped = json["skipped"].as_array().unwrap();
    let reason = |path: &str| {
        skipped
            .iter()
            .find(|s| s["path"].as_str().is_some_and(|p| p.contains(path)))
            .map(|s| s["reason"].as_str().unwrap_or("").to_owned())
    };
    assert!(
        reason("logo.png").is_some_and(|r| r.contains("binary file")),
        "{skipped:?}"
    );
    assert!(
        reason("latin1.txt").is_some_and(|r| r.contains("not valid UTF-8")),
        "{skipped:?}"
    );
    #[cfg(unix)]
    assert!(
        reason("loop").is_some_and(|r| r.to_lowercase().contains("loop")),
        "{skipped:?}"
    );
    assert_eq!(json["summary"]["files"], 4);
    assert_eq!(json["summary"]["skipped"], skipped.len());
}

#[test]
fn readable_output_shows_chunks_and_a_summary() {
    let dir = tree();
    let out = weft(&["chunk", "src", "--full"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("Main.java  [java code]  1 chunk"), "{text}");
    assert!(text.contains("class_declaration"), "{text}");
    assert!(
        text.contains("      | public class Main {"),
        "--full prints the content: {text}"
    );
    assert!(
        text.lines()
            .last()
            .unwrap_or("")
            .contains("2 files, 2 chunks"),
        "{text}"
    );
}

#[test]
fn a_refused_single_file_fails_with_its_reason() {
    let dir = tree();
    let out = weft(&["chunk", "logo.png"], dir.path());
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("skipped logo.png: binary file (NUL byte at offset 8)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_missing_path_names_it() {
    let dir = tree();
    let out = weft(&["chunk", "no/such/dir"], dir.path());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no/such/dir"), "{}", stderr(&out));
}

#[test]
fn configuration_comes_from_weft_toml_and_env_and_bad_keys_are_named() {
    let dir = tree();
    std::fs::write(
        dir.path().join("weft.toml"),
        "[chunking.code]\nmax_chars = 50\nmin_chars = 10\n",
    )
    .unwrap();
    let out = weft(&["chunk", "src/Main.java", "--json"], dir.path());
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let chunks = json["files"][0]["chunks"].as_array().unwrap().len();
    assert!(
        chunks > 1,
        "weft.toml's max_chars = 50 splits Main.java: {chunks}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["chunk", "src/Main.java"])
        .current_dir(dir.path())
        .env("WEFT__CHUNKING__CODE__MIN_CHARS", "500")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("chunking.code.min_chars"),
        "{}",
        stderr(&out)
    );

    std::fs::write(
        dir.path().join("weft.toml"),
        "[chunking.code]\nmax_chars = \"many\"\n",
    )
    .unwrap();
    let out = weft(&["chunk", "src"], dir.path());
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("weft.toml") && err.contains("max_chars"),
        "{err}"
    );

    let out = weft(&["chunk", "src", "--config", "missing.toml"], dir.path());
    assert!(
        stderr(&out).contains("missing.toml does not exist"),
        "{}",
        stderr(&out)
    );
}

/// `weft chunk DIR --json | head -c 300`: the reader goes away after a few
/// hundred bytes of a large output; weft ends quietly (by SIGPIPE, as a Unix
/// filter does), with no panic and no "Broken pipe" message.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..400 {
        let body: String = (0..20)
            .map(|j| format!("    /** Step {j}. */\n    void step{j}() {{ run({i}, {j}); }}\n"))
            .collect();
        std::fs::write(
            dir.path().join(format!("C{i}.java")),
            format!("class C{i} {{\n{body}}}\n"),
        )
        .unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["chunk", ".", "--json"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("weft runs");
    let mut head = [0u8; 300];
    child
        .stdout
        .take()
        .expect("piped")
        .read_exact(&mut head)
        .expect("300 bytes of output");
    // The pipe's reading end is closed here, with most of the output unread.
    let out = child.wait_with_output().expect("weft ends");
    let stderr = stderr(&out);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "a closed stdout must end weft quietly: {stderr}"
    );
    use std::os::unix::process::ExitStatusExt as _;
    assert!(
        out.status.success() || out.status.signal() == Some(libc_sigpipe()),
        "{:?}",
        out.status
    );
}

fn libc_sigpipe() -> i32 {
    13
}

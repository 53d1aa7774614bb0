//! What the private-repository tests share: running a command that must
//! succeed, and a bare repository to serve.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `command`, which must succeed; its standard output.
pub fn run(command: &mut Command) -> String {
    let out = command.output().expect("run a command");
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A bare repository `dir/repos/private.git` of one commit holding `file`
/// with `content`, serving partial clones (`uploadpack.allowFilter`).
pub fn bare_repository(dir: &Path, file: &str, content: &str) -> PathBuf {
    let work = dir.join("work");
    let path = work.join(file);
    std::fs::create_dir_all(path.parent().expect("a file in a directory")).unwrap();
    std::fs::write(path, content).unwrap();
    let git = |args: &[&str]| {
        run(Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args));
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    let bare = dir.join("repos/private.git");
    run(Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&work)
        .arg(&bare));
    run(Command::new("git").arg("-C").arg(&bare).args([
        "config",
        "uploadpack.allowFilter",
        "true",
    ]));
    bare
}

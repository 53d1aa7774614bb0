//! Checkouts are partial clones (`--filter=blob:none`): the history's
//! commits and trees, only the blobs checked out. A later sync fetches and
//! checks out what changed, and the diff between two synced commits (what
//! the incremental re-index reads) works without the old blobs.

use std::path::Path;
use std::process::Command;

use weft_sources::GitRepo;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_checkout_is_a_partial_clone_that_syncs_and_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    // History with large blobs the checkout will not need.
    for i in 0..5 {
        let big: String = (0..20_000).map(|j| format!("{i}-{j}\n")).collect();
        std::fs::write(work.join("big.txt"), big).unwrap();
        git(&work, &["add", "."]);
        git(&work, &["commit", "-q", "-m", &format!("big {i}")]);
    }
    std::fs::remove_file(work.join("big.txt")).unwrap();
    std::fs::write(work.join("a.md"), "# A\n\nfirst\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "small"]);
    let bare = dir.path().join("origin.git");
    let out = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&work)
        .arg(&bare)
        .output()
        .unwrap();
    assert!(out.status.success());
    git(&bare, &["config", "uploadpack.allowFilter", "true"]);

    let url = format!("file://{}", bare.display());
    let checkout = dir.path().join("checkout");
    let repo = GitRepo::new(&url, &checkout);
    let first = repo.sync().unwrap();
    assert_eq!(
        git(&checkout, &["config", "remote.origin.partialclonefilter"]).trim(),
        "blob:none"
    );
    // The old big blobs are not here: only what the checkout holds.
    let missing = git(
        &checkout,
        &["rev-list", "--objects", "--all", "--missing=print"],
    );
    assert!(
        missing.lines().filter(|l| l.starts_with('?')).count() >= 5,
        "the history's blobs were fetched:\n{missing}"
    );
    assert_eq!(
        std::fs::read_to_string(checkout.join("a.md")).unwrap(),
        "# A\n\nfirst\n"
    );

    // A change upstream: fetched, checked out, and diffed.
    std::fs::write(work.join("a.md"), "# A\n\nsecond\n").unwrap();
    std::fs::write(work.join("b.md"), "# B\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "change"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let second = repo.sync().unwrap();
    assert_ne!(first, second);
    assert_eq!(
        std::fs::read_to_string(checkout.join("a.md")).unwrap(),
        "# A\n\nsecond\n"
    );
    let changes = repo.changes(&first, &second).unwrap();
    let mut changed = changes.changed.clone();
    changed.sort();
    assert_eq!(changed, ["a.md", "b.md"]);
    assert!(changes.deleted.is_empty());
}

//! A tree that changes between listing and reading — a file that vanishes,
//! one replaced by a FIFO, one that grows past the size limit — and names
//! that could never be uris: each is reported with its reason, the run
//! never blocks, and what the catalog holds of such files is kept.

#![cfg(unix)]

use std::time::Duration;

use weft_catalog_redb::RedbCatalog;
use weft_core::ports::{Catalog, DocumentRecord};
use weft_core::{DocumentId, IndexIdentity};
use weft_index::{Change, ChangePlanner, ChangeSet, Compare, PlanOptions};
use weft_sources::SourceSpec;

fn options() -> PlanOptions {
    PlanOptions {
        expected: IndexIdentity::new("m", "c"),
        compare: Compare::Everything,
        force: false,
        progress: indicatif::ProgressBar::hidden(),
    }
}

fn record(uri: &str) -> DocumentRecord {
    DocumentRecord {
        document_id: DocumentId::new("p", uri),
        project: "p".into(),
        uri: uri.into(),
        content_hash: "an older version".into(),
        chunk_count: 2,
        identity: IndexIdentity::new("m", "c"),
        version: 0,
    }
}

/// Every change of `set`, read on a blocking thread; fails the test when
/// reading takes over a minute (a FIFO opened for reading waits forever).
async fn read_all(mut set: ChangeSet) -> (Vec<(String, String)>, ChangeSet) {
    let reading = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        for change in set.by_ref() {
            seen.push(match change {
                Change::Index(d) => (d.uri.clone(), "index".to_owned()),
                Change::Unchanged { uri } => (uri, "unchanged".to_owned()),
                Change::Unreadable(issue) => (issue.uri, issue.reason),
            });
        }
        (seen, set)
    });
    tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("reading the listed files blocked")
        .unwrap()
}

#[tokio::test]
async fn files_that_change_after_listing_are_reported_and_kept() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    for name in ["a.md", "gone.md", "piped.md", "grows.md"] {
        std::fs::write(root.join(name), format!("# {name}\n\nSmall.\n")).unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    let catalog = RedbCatalog::open(&data.path().join("catalog.redb")).unwrap();
    // Indexed before: an earlier version of the file that will vanish.
    Catalog::put_documents(&catalog, &[record("gone.md")])
        .await
        .unwrap();

    let planner = ChangePlanner::new(
        &Default::default(),
        &Default::default(),
        data.path().join("sources"),
    )
    .unwrap()
    .with_max_file_bytes(1000);
    let set = planner
        .plan(&catalog, &SourceSpec::Dir(root.to_owned()), "p", &options())
        .await
        .unwrap();
    assert_eq!(set.listed(), 4);

    // Between listing and reading.
    std::fs::remove_file(root.join("gone.md")).unwrap();
    std::fs::remove_file(root.join("piped.md")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("piped.md"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(root.join("grows.md"), "x".repeat(5000)).unwrap();

    let (seen, set) = read_all(set).await;
    let outcome = |uri: &str| {
        seen.iter()
            .find(|(u, _)| u == uri)
            .map(|(_, o)| o.as_str())
            .unwrap_or_else(|| panic!("{uri}: {seen:?}"))
    };
    assert_eq!(outcome("a.md"), "index");
    assert!(
        outcome("gone.md").starts_with("cannot be read: No such file"),
        "{seen:?}"
    );
    assert_eq!(
        outcome("piped.md"),
        "is a FIFO (named pipe) now, not a regular file: not read"
    );
    assert!(
        outcome("grows.md").starts_with("5000 bytes is over chunking.max_file_bytes (1000)"),
        "{seen:?}"
    );
    // The vanished file was listed: its catalogued version is not removed
    // by this run (the next run, which no longer lists it, removes it).
    assert!(set.removed().is_empty(), "{:?}", set.removed());
}

#[tokio::test]
async fn names_that_cannot_be_uris_are_reported_not_read() {
    use std::os::unix::ffi::OsStrExt as _;
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    let write = |name: &[u8]| {
        std::fs::write(
            root.join(std::ffi::OsStr::from_bytes(name)),
            "# Doc\n\nText.\n",
        )
        .unwrap()
    };
    write(b"ok.md");
    write(b"tab\there.md");
    write(b"esc\x1b[31m.md");
    write(b"bell\x07.md");
    write(b"latin\xe9.md");
    let data = tempfile::tempdir().unwrap();
    let catalog = RedbCatalog::open(&data.path().join("catalog.redb")).unwrap();
    let planner =
        ChangePlanner::new(&Default::default(), &Default::default(), data.path()).unwrap();
    let set = planner
        .plan(&catalog, &SourceSpec::Dir(root.to_owned()), "p", &options())
        .await
        .unwrap();
    let mut skipped: Vec<(String, String)> = set
        .skipped
        .iter()
        .map(|i| (i.uri.clone(), i.reason.clone()))
        .collect();
    skipped.sort();
    let expected = [
        (
            "bell\\u{7}.md",
            "its path holds a control character (U+0007) at byte 4: not read",
        ),
        (
            "esc\\u{1b}[31m.md",
            "its path holds a control character (U+001B) at byte 3: not read",
        ),
        (
            "latin\u{fffd}.md",
            "its name is not valid UTF-8 (shown with U+FFFD): not read",
        ),
        (
            "tab\\there.md",
            "its path holds a control character (U+0009) at byte 3: not read",
        ),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(u, r)| (u.to_string(), r.to_string()))
        .collect();
    assert_eq!(skipped, expected);
    assert_eq!(set.listed(), 1);
    let (seen, _) = read_all(set).await;
    assert_eq!(seen, [("ok.md".to_owned(), "index".to_owned())]);
}

#[tokio::test]
async fn a_project_name_that_cannot_be_one_is_refused_before_anything_is_read() {
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("a.md"), "# A\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let catalog = RedbCatalog::open(&data.path().join("catalog.redb")).unwrap();
    let planner =
        ChangePlanner::new(&Default::default(), &Default::default(), data.path()).unwrap();
    for (project, says) in [
        ("", "is empty"),
        ("a\nb", "U+000A"),
        (&"p".repeat(300)[..], "300 characters"),
    ] {
        let err = planner
            .plan(
                &catalog,
                &SourceSpec::Dir(tree.path().to_owned()),
                project,
                &options(),
            )
            .await
            .expect_err(project);
        assert!(err.to_string().contains(says), "{err}");
    }
}

/// Issue 33, hole 2: a listed file replaced by a symlink to a file outside
/// the tree after listing (the listing refuses such links; the read came
/// later and followed it), and a directory on a listed file's path replaced
/// by a link to a directory outside: neither outside file is read.
#[tokio::test]
async fn a_file_swapped_for_a_symlink_after_listing_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY outside").unwrap();
    std::fs::create_dir(outside.path().join("sub")).unwrap();
    std::fs::write(outside.path().join("sub/b.md"), "PRIVATE KEY in a dir").unwrap();
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    std::fs::write(root.join("a.md"), "# A\n\nIn the tree.\n").unwrap();
    std::fs::write(root.join("swapped.md"), "# Swapped\n\nIn the tree.\n").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/b.md"), "# B\n\nIn the tree.\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let catalog = RedbCatalog::open(&data.path().join("catalog.redb")).unwrap();
    let planner =
        ChangePlanner::new(&Default::default(), &Default::default(), data.path()).unwrap();
    let set = planner
        .plan(&catalog, &SourceSpec::Dir(root.to_owned()), "p", &options())
        .await
        .unwrap();
    assert_eq!(set.listed(), 3);

    // Between listing and reading: a file becomes a link out of the tree,
    // and a directory of the tree becomes one.
    std::fs::remove_file(root.join("swapped.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("id_rsa"), root.join("swapped.md")).unwrap();
    std::fs::rename(root.join("sub"), root.join("sub.old")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("sub"), root.join("sub")).unwrap();

    // Read the documents, keeping what each one's content was.
    let reading = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        for change in set {
            seen.push(match change {
                Change::Index(d) => (
                    d.uri.clone(),
                    String::from_utf8_lossy(&d.content).into_owned(),
                ),
                Change::Unchanged { uri } => (uri, "unchanged".to_owned()),
                Change::Unreadable(issue) => (issue.uri, issue.reason),
            });
        }
        seen
    });
    let seen = tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("reading the listed files blocked")
        .unwrap();
    eprintln!("{seen:#?}");
    assert!(
        seen.iter()
            .all(|(_, outcome)| !outcome.contains("PRIVATE KEY")),
        "a file outside the tree was read: {seen:?}"
    );
    let outcome = |uri: &str| {
        seen.iter()
            .find(|(u, _)| u == uri)
            .map(|(_, o)| o.as_str())
            .unwrap_or_else(|| panic!("{uri}: {seen:?}"))
    };
    assert_eq!(outcome("a.md"), "# A\n\nIn the tree.\n");
    assert_eq!(
        outcome("swapped.md"),
        "is a symbolic link now, not a regular file: not read"
    );
    assert!(
        outcome("sub/b.md").contains("not the file that was listed"),
        "{seen:?}"
    );
}

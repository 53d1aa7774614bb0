//! Issue 33, hole 2: a tree changes between its listing and the reading of
//! the files listed. A file replaced by a symlink to a file outside the
//! tree, and a directory of the tree replaced by a link to one outside, are
//! not read (the listing refuses such links; the read came later and
//! followed them). `crates/index/tests/hostile_listing.rs` shows the same
//! through a whole plan.

#![cfg(unix)]

use weft_config::SourcesConfig;
use weft_sources::{DirSelection, read_listed_file, walk_dir};

#[test]
fn files_swapped_for_links_out_of_the_tree_after_listing_are_not_read() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY outside").unwrap();
    std::fs::create_dir(outside.path().join("sub")).unwrap();
    std::fs::write(outside.path().join("sub/b.md"), "PRIVATE KEY in a dir").unwrap();
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    std::fs::write(root.join("a.md"), "in the tree").unwrap();
    std::fs::write(root.join("swapped.md"), "in the tree").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/b.md"), "in the tree").unwrap();
    let walk = walk_dir(root, &DirSelection::new(&SourcesConfig::default()).unwrap());
    let uris: Vec<&str> = walk.files.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(uris, ["a.md", "sub/b.md", "swapped.md"]);

    // After listing: a file becomes a link out of the tree, and so does a
    // directory.
    std::fs::remove_file(root.join("swapped.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("id_rsa"), root.join("swapped.md")).unwrap();
    std::fs::rename(root.join("sub"), root.join("sub.old")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("sub"), root.join("sub")).unwrap();

    let read: Vec<(String, Result<String, String>)> = walk
        .files
        .iter()
        .map(|(uri, path)| {
            let bytes = read_listed_file(path, walk.identities.get(path).copied(), 1000);
            (
                uri.clone(),
                bytes.map(|b| String::from_utf8_lossy(&b).into_owned()),
            )
        })
        .collect();
    eprintln!("{read:#?}");
    assert!(
        read.iter()
            .all(|(_, r)| !r.as_ref().is_ok_and(|text| text.contains("PRIVATE KEY"))),
        "a file outside the tree was read: {read:?}"
    );
    assert_eq!(read[0], ("a.md".to_owned(), Ok("in the tree".to_owned())));
    assert_eq!(
        read[1],
        (
            "sub/b.md".to_owned(),
            Err("is not the file that was listed any more (it, or a directory on its path, was replaced): not read".to_owned())
        )
    );
    assert_eq!(
        read[2],
        (
            "swapped.md".to_owned(),
            Err("is a symbolic link now, not a regular file: not read".to_owned())
        )
    );
}

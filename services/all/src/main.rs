//! `weft-all`: every weft program in one binary, the one the container
//! image ships (five binaries would repeat the same dependencies five
//! times). It runs the program it is called by, the name it is run as
//! (a link `weft-query` → `weft-all` runs `weft-query`), with that
//! program's arguments, output and exit status. Each program is still its
//! own binary too, linking only what its job needs (DESIGN §2,
//! bench/binary-deps.sh).

use std::path::Path;
use std::process::ExitCode;

/// A program's `main`.
type Program = fn() -> ExitCode;

/// The programs, by the names they are run as.
const PROGRAMS: &[(&str, Program)] = &[
    ("weft", weft_cli::main),
    ("weft-crawler", weft_crawler::main),
    ("weft-chunker", weft_chunker::main),
    ("weft-embedder", weft_embedder::main),
    ("weft-query", weft_query::main),
];

fn main() -> ExitCode {
    let called = std::env::args_os()
        .next()
        .and_then(|arg0| {
            Path::new(&arg0)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    match PROGRAMS.iter().find(|(name, _)| *name == called) {
        Some((_, program)) => program(),
        None => {
            let names: Vec<&str> = PROGRAMS.iter().map(|(name, _)| *name).collect();
            eprintln!(
                "weft-all runs the weft program it is called by ({}), not {called:?}: \
                 link one of those names to it (ln -s weft-all weft-query) and run the link",
                names.join(", ")
            );
            ExitCode::from(2)
        }
    }
}

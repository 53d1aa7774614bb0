//! `weft-crawler`: publishes the new, changed and deleted documents of
//! sources to the distributed pipeline, then exits (a Kubernetes Job); and
//! `weft-crawler generations …`, the operator's view of index generations.

fn main() -> std::process::ExitCode {
    weft_crawler::main()
}

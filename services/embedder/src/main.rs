//! `weft-embedder`: an embedder worker of the distributed pipeline.

fn main() -> std::process::ExitCode {
    weft_embedder::main()
}

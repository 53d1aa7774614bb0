//! `weft-chunker`: a chunker worker of the distributed pipeline.

fn main() -> std::process::ExitCode {
    weft_chunker::main()
}

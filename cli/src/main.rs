//! `weft`: the all-in-one command line (the program is `weft_cli::main`).

fn main() -> std::process::ExitCode {
    weft_cli::main()
}

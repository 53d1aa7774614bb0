//! `weft-query`: the gRPC query service.

fn main() -> std::process::ExitCode {
    weft_query::main()
}

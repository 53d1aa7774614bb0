//! Compiles `proto/weft/v1/*.proto` with protox (no system protoc) and prost.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
    let files = ["weft/v1/pipeline.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={root}/{file}");
    }
    let descriptors = protox::compile(files, [root])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}

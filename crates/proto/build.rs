//! Compiles `proto/weft/v1/*.proto` with protox (no system protoc), prost
//! and tonic, and keeps the file descriptor set for gRPC server reflection.

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time: a build script compiled in another checkout of the
    // workspace (same target directory) must not look in that checkout.
    let root = format!("{}/../../proto", std::env::var("CARGO_MANIFEST_DIR")?);
    let files = ["weft/v1/pipeline.proto", "weft/v1/query.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={root}/{file}");
    }
    let descriptors = protox::compile(files, [&root])?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("weft_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}

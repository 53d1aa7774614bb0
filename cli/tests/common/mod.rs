//! What the CLI tests share: the test model and reading weft's JSON output.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

/// The model directory: `WEFT_MODEL_DIR`, else where tools/fetch-model.sh puts it.
pub fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/weft/models/all-MiniLM-L6-v2")
        })
}

/// The JSON a successful run printed.
pub fn json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "weft failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

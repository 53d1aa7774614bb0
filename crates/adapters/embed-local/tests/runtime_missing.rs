//! Without the ONNX Runtime library, loading a model is an error that names
//! the file tried and the command that fetches it (its own test binary: the
//! library is loaded once per process).

use std::path::PathBuf;

use weft_embed_local::{DEFAULT_MAX_TOKENS, LoadError, LocalEmbedder};

#[test]
fn a_missing_runtime_names_the_file_and_the_fetch_command() {
    let missing = std::env::temp_dir().join("weft-no-onnxruntime-here/libonnxruntime.so");
    // SAFETY: the only test of this binary; nothing else reads the
    // environment concurrently.
    unsafe { std::env::set_var("WEFT_ORT_LIB", &missing) };
    let dir = std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/weft/models/all-MiniLM-L6-v2")
        });
    let err = LocalEmbedder::load(&dir, DEFAULT_MAX_TOKENS).unwrap_err();
    assert!(matches!(err, LoadError::Runtime { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("weft-no-onnxruntime-here")
            && message.contains("tools/fetch-model.sh")
            && message.contains("WEFT_ORT_LIB"),
        "{message}"
    );
}

//! The ONNX Runtime library, loaded at run time (nothing of it is needed to
//! build weft): `WEFT_ORT_LIB` names the file, else the copy that
//! `tools/fetch-model.sh` takes from the PyPI `onnxruntime` wheel into
//! `~/.cache/weft/onnxruntime-<version>/`.

use std::path::PathBuf;
use std::sync::OnceLock;

use ort::environment::Environment;

/// The ONNX Runtime release `tools/fetch-model.sh` fetches (and this crate
/// is tested with).
pub const VERSION: &str = "1.32.0";

/// The environment variable naming the library file.
pub const LIB_ENV: &str = "WEFT_ORT_LIB";

/// Where the runtime library is looked for: `WEFT_ORT_LIB`, else
/// `~/.cache/weft/onnxruntime-<VERSION>/libonnxruntime.so.<VERSION>`
/// (`libonnxruntime.<VERSION>.dylib` on macOS).
pub fn library_path() -> PathBuf {
    if let Some(path) = std::env::var_os(LIB_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let file = if cfg!(target_os = "macos") {
        format!("libonnxruntime.{VERSION}.dylib")
    } else {
        format!("libonnxruntime.so.{VERSION}")
    };
    home.join(format!(".cache/weft/onnxruntime-{VERSION}"))
        .join(file)
}

/// Loads the library (once per process) and returns the environment every
/// session is made in, or why that failed.
pub fn environment() -> Result<&'static Environment, (PathBuf, String)> {
    static ENVIRONMENT: OnceLock<Result<Environment, (PathBuf, String)>> = OnceLock::new();
    ENVIRONMENT
        .get_or_init(|| {
            let path = library_path();
            if !path.is_file() {
                return Err((path, "no such file".into()));
            }
            let builder = ort::init_from(&path).map_err(|e| (path.clone(), e.to_string()))?;
            builder
                .with_name("weft")
                .build()
                .map_err(|e| (path.clone(), e.to_string()))
        })
        .as_ref()
        .map_err(Clone::clone)
}

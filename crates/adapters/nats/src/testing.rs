//! A real `nats-server` with JetStream for tests: started on a free loopback
//! port with its store in a temporary directory, killed when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nats-server.
pub struct NatsServer {
    child: Child,
    port: u16,
    _store: tempfile::TempDir,
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("WEFT_NATS_SERVER") {
        return path.into();
    }
    for candidate in [
        "/usr/sbin/nats-server",
        "/usr/bin/nats-server",
        "/usr/local/bin/nats-server",
    ] {
        if std::path::Path::new(candidate).exists() {
            return candidate.into();
        }
    }
    "nats-server".into()
}

impl NatsServer {
    /// Starts one; panics (these are tests) when it cannot, saying how to install it.
    pub fn start() -> Self {
        let store = tempfile::tempdir().expect("temporary directory");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new(binary())
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("these tests need nats-server (apt-get install nats-server, or set WEFT_NATS_SERVER): {e}")
            });
        let server = Self {
            child,
            port,
            _store: store,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Options pointing at it, with short redelivery for tests.
    pub fn config(&self) -> crate::NatsOptions {
        crate::NatsOptions {
            url: self.url(),
            ack_wait_secs: 5,
            max_deliver: 3,
            ..Default::default()
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

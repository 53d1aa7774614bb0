//! A real `nats-server` with JetStream for tests: started on a free loopback
//! port with its store in a temporary directory, killed when dropped; and
//! reading back the dead-letter stream.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running nats-server.
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    store: tempfile::TempDir,
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
        let mut server = Self {
            child: None,
            port,
            store,
        };
        server.restart();
        server
    }

    /// Kills it with SIGKILL (no clean shutdown: what JetStream has not
    /// synced to disk is lost, as in a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again (after [`NatsServer::kill`]) on the same port with
    /// the same JetStream store, and waits until it accepts connections.
    pub fn restart(&mut self) {
        self.kill();
        let port = self.port;
        let child = Command::new(binary())
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(self.store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("these tests need nats-server (apt-get install nats-server, or set WEFT_NATS_SERVER): {e}")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Options pointing at it, with short redelivery for tests.
    pub fn config(&self) -> weft_config::NatsConfig {
        weft_config::NatsConfig {
            url: self.url(),
            ack_wait_secs: 5,
            max_deliver: 3,
            ..Default::default()
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One message of the dead-letter stream, with the headers the worker set.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// Where it was dead-lettered: `weft.dead.<stage>.…`.
    pub subject: String,
    /// `Weft-Original-Subject`.
    pub original_subject: String,
    /// `Weft-Stage`.
    pub stage: String,
    /// `Weft-Error`: why.
    pub error: String,
    /// `Weft-Error-Kind`: the kind of that error (`invalid`, `unavailable`, …).
    pub kind: String,
    /// `Weft-Deliveries`: how often it was delivered.
    pub deliveries: String,
    /// The message as it came.
    pub payload: bytes::Bytes,
}

/// Waits until the dead-letter stream holds at least `count` messages (at
/// most `timeout`), then returns all it holds, oldest first.
pub async fn dead_letters(jet: &crate::Jet, count: usize, timeout: Duration) -> Vec<DeadLetter> {
    use futures::StreamExt;
    let stream = jet.config().dead_letter_stream.clone();
    let deadline = Instant::now() + timeout;
    while (jet.stream_messages(&stream).await.unwrap_or(0) as usize) < count
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held = jet.stream_messages(&stream).await.unwrap_or(0) as usize;
    if held == 0 {
        return Vec::new();
    }
    let consumer = jet
        .jetstream()
        .get_stream(&stream)
        .await
        .expect("the dead-letter stream")
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .expect("a consumer of the dead-letter stream");
    let mut batch = consumer
        .fetch()
        .max_messages(held)
        .messages()
        .await
        .expect("fetch dead letters");
    let mut letters = Vec::new();
    while let Some(message) = batch.next().await {
        let message = message.expect("a dead letter");
        let header = |name: &str| {
            message
                .headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default()
        };
        letters.push(DeadLetter {
            subject: message.subject.to_string(),
            original_subject: header(crate::SUBJECT_HEADER),
            stage: header(crate::STAGE_HEADER),
            error: header(crate::ERROR_HEADER),
            kind: header(crate::ERROR_KIND_HEADER),
            deliveries: header(crate::DELIVERIES_HEADER),
            payload: message.payload.clone(),
        });
    }
    letters
}

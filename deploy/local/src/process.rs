//! Containers as processes: starting, probing and stopping them.

use std::io::{Read as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::objects::{Container, IntOrString};

/// A probe of a container, as its manifest declares it, with the port
/// mapped to the local one.
#[derive(Debug, Clone)]
pub struct Probe {
    /// `startupProbe`, `readinessProbe` or `livenessProbe`.
    pub which: &'static str,
    /// What it does.
    pub action: ProbeAction,
    /// periodSeconds × failureThreshold: how long Kubernetes would wait.
    pub budget: Duration,
}

/// What a probe does.
#[derive(Debug, Clone)]
pub enum ProbeAction {
    /// `httpGet`: a status in 200..400.
    Http {
        /// Path and query.
        path: String,
        /// The local port.
        port: u16,
    },
    /// `grpc`: grpc.health.v1 Check answers SERVING.
    Grpc {
        /// The local port.
        port: u16,
        /// The service checked ("" is the server as a whole).
        service: String,
    },
    /// `tcpSocket`: the port accepts a connection.
    Tcp {
        /// The local port.
        port: u16,
    },
}

impl Probe {
    /// The probes of `container`; `port` maps a port (number or name) to
    /// its local port.
    pub fn of(
        container: &Container,
        port: &dyn Fn(&IntOrString) -> Result<u16, String>,
    ) -> Result<Vec<Probe>, String> {
        let mut probes = Vec::new();
        for (which, p) in [
            ("startupProbe", &container.startup_probe),
            ("readinessProbe", &container.readiness_probe),
            ("livenessProbe", &container.liveness_probe),
        ] {
            let Some(p) = p else {
                continue;
            };
            let action = if let Some(http) = &p.http_get {
                ProbeAction::Http {
                    path: http.path.clone().unwrap_or_else(|| "/".to_owned()),
                    port: port(&http.port)?,
                }
            } else if let Some(grpc) = &p.grpc {
                ProbeAction::Grpc {
                    port: port(&IntOrString::Int(grpc.port))?,
                    service: grpc.service.clone(),
                }
            } else if let Some(tcp) = &p.tcp_socket {
                ProbeAction::Tcp {
                    port: port(&tcp.port)?,
                }
            } else {
                return Err(format!(
                    "{which}: only httpGet, grpc and tcpSocket probes are run here"
                ));
            };
            let period = p.period_seconds.unwrap_or(10);
            let failures = p.failure_threshold.unwrap_or(3);
            probes.push(Probe {
                which,
                action,
                budget: Duration::from_secs(
                    period
                        .saturating_mul(failures)
                        .saturating_add(p.initial_delay_seconds.unwrap_or(0)),
                ),
            });
        }
        Ok(probes)
    }

    /// Runs it once.
    pub async fn check(&self) -> Result<(), String> {
        match &self.action {
            ProbeAction::Http { path, port } => {
                let port = *port;
                let path = path.clone();
                tokio::task::spawn_blocking(move || http_get(port, &path).map(drop))
                    .await
                    .map_err(|e| e.to_string())?
            }
            ProbeAction::Grpc { port, service } => {
                let channel =
                    tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                        .map_err(|e| e.to_string())?
                        .connect_timeout(Duration::from_secs(2))
                        .timeout(Duration::from_secs(2))
                        .connect()
                        .await
                        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
                let reply = tonic_health::pb::health_client::HealthClient::new(channel)
                    .check(tonic_health::pb::HealthCheckRequest {
                        service: service.clone(),
                    })
                    .await
                    .map_err(|e| format!("grpc.health.v1 Check({service:?}): {e}"))?;
                let serving =
                    tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
                if reply.get_ref().status == serving {
                    Ok(())
                } else {
                    Err(format!(
                        "grpc.health.v1 Check({service:?}): status {}",
                        reply.get_ref().status
                    ))
                }
            }
            ProbeAction::Tcp { port } => std::net::TcpStream::connect(("127.0.0.1", *port))
                .map(drop)
                .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}")),
        }
    }
}

/// `GET path` on a loopback port (HTTP/1.0: no chunked body): the body,
/// for a status in 200..400.
pub fn http_get(port: u16, path: &str) -> Result<String, String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    let status: u16 = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: no HTTP status in {response:?}"))?;
    if (200..400).contains(&status) {
        Ok(response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default())
    } else {
        Err(format!("GET {path}: HTTP {status}"))
    }
}

/// A container run as a local process, its stdout and stderr in files;
/// killed when dropped.
pub struct Proc {
    /// `Kind/name container`, for messages.
    pub id: String,
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    exited: Option<ExitStatus>,
}

impl Proc {
    /// Starts `program` with `args`, exactly `env` (plus this machine's
    /// PATH unless `env` sets it), in `cwd`, as `user` when given.
    pub fn spawn(
        id: &str,
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        cwd: &Path,
        user: Option<(u32, u32)>,
        logs: &Path,
    ) -> Result<Self, String> {
        let file = id.replace(['/', ' '], "_");
        let stdout = logs.join(format!("{file}.stdout"));
        let stderr = logs.join(format!("{file}.stderr"));
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).map_err(|e| e.to_string())?)
            .stderr(std::fs::File::create(&stderr).map_err(|e| e.to_string())?);
        if !env.iter().any(|(k, _)| k == "PATH") {
            command.env("PATH", std::env::var("PATH").unwrap_or_default());
        }
        command.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some((uid, gid)) = user {
            command.uid(uid).gid(gid);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("{id}: cannot start {}: {e}", program.display()))?;
        Ok(Self {
            id: id.to_owned(),
            child,
            stdout,
            stderr,
            exited: None,
        })
    }

    /// Its exit status, once it exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// What it printed on stdout.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// What it printed on stderr, without terminal colours.
    pub fn stderr(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.stderr).unwrap_or_default())
    }

    /// Waits up to `timeout` for it to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (what the kubelet sends), then waits up to `grace`.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.exited().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
        }
        self.wait(grace)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `text` without ANSI colour sequences.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

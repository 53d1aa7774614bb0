//! Private repositories over ssh, as the distributed crawler reaches them:
//! a real `sshd` (Debian's openssh-server) on a free loopback port with a
//! generated host key, a bare repository behind it, and the crawler's git
//! given `crawl.git_ssh_key_file` and `crawl.git_known_hosts_file`.
//!
//! The key opens the repository; a server whose host key is not in the
//! known hosts is refused (never trusted on first use); no error shows the
//! key. Skipped, saying so, where no `sshd` is installed (tools/test.sh
//! installs openssh-server).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_config::CrawlConfig;
use weft_sources::{GitPolicy, GitRepo};

mod common;
use common::{bare_repository, run};

fn sshd() -> Option<PathBuf> {
    ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn keygen(path: &Path) -> String {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "weft-test", "-f"])
        .arg(path));
    std::fs::read_to_string(path.with_extension("pub")).expect("the public key")
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// sshd on a free loopback port, letting in `user_key` (a public key).
fn start_sshd(sshd: &Path, dir: &Path, user_key: &str) -> (Server, String) {
    let host_key = dir.join("host_ed25519");
    let host_public = keygen(&host_key);
    let authorized = dir.join("authorized_keys");
    std::fs::write(&authorized, user_key).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nPidFile {}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n",
            host_key.display(),
            authorized.display(),
            dir.join("sshd.pid").display()
        ),
    )
    .unwrap();
    // sshd wants its privilege separation directory.
    let _ = std::fs::create_dir_all("/run/sshd");
    let child = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sshd");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "sshd did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Server { child, port }, host_public)
}

fn user() -> String {
    run(Command::new("id").arg("-un")).trim().to_owned()
}

fn config(key: &Path, known_hosts: &Path) -> CrawlConfig {
    CrawlConfig {
        git_protocols: vec!["ssh".into()],
        allow_private_networks: vec!["127.0.0.1/32".into()],
        git_ssh_key_file: Some(key.to_owned()),
        git_known_hosts_file: Some(known_hosts.to_owned()),
        ..CrawlConfig::default()
    }
}

#[test]
fn a_private_repository_is_cloned_with_the_configured_key_and_known_hosts_only() {
    let Some(sshd) = sshd() else {
        eprintln!("skipped: no sshd here (apt-get install openssh-server; tools/test.sh does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id_ed25519");
    let user_public = keygen(&key);
    let (server, host_public) = start_sshd(&sshd, dir.path(), &user_public);
    let bare = bare_repository(
        dir.path(),
        "src/secret_sauce.py",
        "def sauce():\n    return 42\n",
    );
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        user(),
        server.port,
        bare.display()
    );
    let host_key = host_public
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!("[127.0.0.1]:{} {host_key}\n", server.port),
    )
    .unwrap();
    config(&key, &known_hosts).validate().unwrap();

    // The key and the host's known key: cloned (whole: the repository
    // allows filters, but over ssh a partial clone's later fetch of blobs
    // by id needs protocol v2, which this sshd does not pass on).
    let policy = GitPolicy::from_crawl_config(&config(&key, &known_hosts)).unwrap();
    let checkout = dir.path().join("checkout");
    let repo = GitRepo::with_policy(&url, &checkout, policy);
    repo.sync()
        .unwrap_or_else(|e| panic!("clone over ssh: {e}"));
    assert_eq!(
        std::fs::read_to_string(checkout.join("src/secret_sauce.py")).unwrap(),
        "def sauce():\n    return 42\n"
    );

    let secret = std::fs::read_to_string(&key).unwrap();
    let secret_line = secret
        .lines()
        .find(|l| !l.starts_with("-----"))
        .unwrap()
        .to_owned();

    // A host key that is not the server's: refused, not trusted.
    let other = dir.path().join("other_host");
    let other_public = keygen(&other);
    let wrong = other_public
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let wrong_hosts = dir.path().join("wrong_known_hosts");
    std::fs::write(
        &wrong_hosts,
        format!("[127.0.0.1]:{} {wrong}\n", server.port),
    )
    .unwrap();
    let policy = GitPolicy::from_crawl_config(&config(&key, &wrong_hosts)).unwrap();
    let error = GitRepo::with_policy(&url, &dir.path().join("checkout-2"), policy)
        .sync()
        .expect_err("a changed host key is refused");
    let message = error.to_string();
    assert!(
        message.to_lowercase().contains("host key"),
        "names the host key: {message}"
    );
    assert!(!message.contains(&secret_line), "{message}");

    // A host missing from the known hosts: refused too.
    let empty = dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let policy = GitPolicy::from_crawl_config(&config(&key, &empty)).unwrap();
    let error = GitRepo::with_policy(&url, &dir.path().join("checkout-3"), policy)
        .sync()
        .expect_err("an unknown host is refused");
    assert!(!error.to_string().contains(&secret_line));

    // Another key than the one the server lets in: refused.
    let stranger = dir.path().join("stranger");
    keygen(&stranger);
    let policy = GitPolicy::from_crawl_config(&config(&stranger, &known_hosts)).unwrap();
    let error = GitRepo::with_policy(&url, &dir.path().join("checkout-4"), policy)
        .sync()
        .expect_err("a key the server does not know is refused");
    assert!(error.to_string().contains("Permission denied"), "{error}");
}

#[test]
fn an_ssh_key_without_known_hosts_is_refused_naming_the_setting() {
    let config = CrawlConfig {
        git_ssh_key_file: Some("/etc/weft-git/id_ed25519".into()),
        ..CrawlConfig::default()
    };
    let error = config.validate().expect_err("no known hosts");
    assert_eq!(error.key, "crawl.git_ssh_key_file");
    assert!(error.message.contains("git_known_hosts_file"), "{error}");
}

//! A real HTTP/1.1 server on a loopback port for the crawler's tests: one
//! thread per connection, `Connection: close`, answers from a handler, and
//! a count of the requests it saw (to show that a refused address was
//! never connected to).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request as the handler sees it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request target (a path, or an absolute URL through a proxy).
    pub target: String,
    /// The headers, names lowercase.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers.
pub enum Reply {
    /// A whole response.
    Full {
        status: &'static str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Headers, then the body one byte every `every`, forever.
    Drip {
        content_type: &'static str,
        every: Duration,
    },
    /// Nothing at all: the connection stays open, silent.
    Silence,
}

impl Reply {
    /// 200 with a content type.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self::Full {
            status: "200 OK",
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// A redirect.
    pub fn redirect(location: &str) -> Self {
        Self::Full {
            status: "302 Found",
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }

    /// 404.
    pub fn not_found() -> Self {
        Self::Full {
            status: "404 Not Found",
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"not found".to_vec(),
        }
    }
}

/// A running server.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    /// Serves on `bind` (`127.0.0.1:0`, `[::1]:0`, …) until the test ends.
    pub fn start(bind: &str, handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind(bind).unwrap_or_else(|e| panic!("bind {bind}: {e}"));
        Self::on(listener, handler)
    }

    /// Serves on a listener already bound.
    pub fn on(
        listener: TcpListener,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let (h, s) = (hits.clone(), seen.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let (handler, seen) = (handler.clone(), s.clone());
                std::thread::spawn(move || answer(stream, handler.as_ref(), &seen));
            }
        });
        Self { addr, hits, seen }
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The requests seen so far.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    /// `http://<addr>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn answer(
    mut stream: TcpStream,
    handler: &(dyn Fn(&Request) -> Reply + Send + Sync),
    seen: &Mutex<Vec<Request>>,
) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let request = Request {
        target: request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_owned(),
        headers,
    };
    seen.lock().unwrap().push(request.clone());
    match handler(&request) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status}\r\n");
            for (name, value) in &headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            ));
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
        Reply::Drip {
            content_type,
            every,
        } => {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n"
            );
            // With no pause, blocks: a byte per write took over 2 s to pass
            // 1 MiB on a loaded 2-core machine, and hit the timeout first.
            let block = if every.is_zero() {
                vec![b'x'; 8192]
            } else {
                vec![b'x']
            };
            while stream.write_all(&block).is_ok() {
                std::thread::sleep(every);
            }
        }
        Reply::Silence => {
            // Hold the connection until the client gives up.
            let mut buf = [0u8; 64];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
            let _ = stream.read(&mut buf);
        }
    }
}

/// A small HTML page with a title, a body and links.
pub fn html(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><title>{title}</title></head><body><main>{body}</main></body></html>"
    )
}

//! Secrets never printed (issue 18): `weft serve` with a keys file, asked
//! with a known API key, a wrong one and none, at `WEFT_LOG=trace`, with
//! store keys and the API key in its environment; then `weft status --json`,
//! `weft keys new` and every `--help`. Their captured stdout and stderr are
//! grepped for each secret.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;
use common::{json, model_dir};

const QDRANT_SECRET: &str = "qdrant-secret-71c0de5e";
const MEILI_SECRET: &str = "meili-secret-9a4b77f1";
const EMBEDDING_SECRET: &str = "embedding-secret-3e8d21aa";

/// weft with the data directory, the model and secrets in its environment.
fn weft(data: &Path, api_key: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .env("WEFT_DATA_DIR", data)
        .env("WEFT_MODEL_DIR", model_dir())
        .env("WEFT_LOG", "trace")
        .env("WEFT_API_KEY", api_key)
        .env("QDRANT_API_KEY", QDRANT_SECRET)
        .env("MEILI_API_KEY", MEILI_SECRET)
        .env("MEILI_SEARCH_KEY", MEILI_SECRET)
        .env("EMBEDDING_API_KEY", EMBEDDING_SECRET)
        .env("WEFT__STORES__QDRANT_API_KEY_ENV", "QDRANT_API_KEY")
        .env("WEFT__STORES__MEILI_API_KEY_ENV", "MEILI_API_KEY")
        .env("WEFT__STORES__MEILI_SEARCH_KEY_ENV", "MEILI_SEARCH_KEY")
        .env("WEFT__EMBEDDING__API_KEY_ENV", "EMBEDDING_API_KEY")
        .env_remove("WEFT__RERANK__KIND");
    command
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn keys_and_store_secrets_appear_in_no_output() {
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(
        tree.path().join("guide.md"),
        "# Guide\n\n## Deploying\n\nDeploy with the release script.\n",
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = weft(data.path(), "")
        .args([
            "index",
            tree.path().to_str().unwrap(),
            "--project",
            "p",
            "--json",
        ])
        .output()
        .unwrap();
    json(&out);

    // The key is printed by `weft keys new`, once: that is its job.
    let minted = weft(data.path(), "")
        .args(["keys", "new", "--id", "ci", "--project", "p", "--json"])
        .output()
        .unwrap();
    let minted: Value = json(&minted);
    let key = minted["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("weft_"), "{minted}");
    let keys_file = data.path().join("keys.toml");
    std::fs::write(&keys_file, minted["entry_toml"].as_str().unwrap()).unwrap();
    assert!(!std::fs::read_to_string(&keys_file).unwrap().contains(&key));
    let mut wrong = key.clone();
    wrong.replace_range(20..24, "0000");
    let wrong = if wrong == key {
        key.replace("weft_", "weft_f")
    } else {
        wrong
    };

    // weft serve with the keys file, on a free port.
    let log = data.path().join("serve.log");
    let mut serve = weft(data.path(), &key)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("WEFT__QUERY__API_KEYS_FILE", &keys_file)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stdout = serve.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    break addr.trim().to_owned();
                }
            }
            _ => {
                let _ = serve.kill();
                panic!(
                    "weft serve did not start:\n{}",
                    std::fs::read_to_string(&log).unwrap()
                );
            }
        }
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let codes = runtime.block_on(async {
        use weft_proto::v1;
        let mut client =
            v1::query_service_client::QueryServiceClient::connect(format!("http://{addr}"))
                .await
                .unwrap();
        let mut codes = Vec::new();
        for presented in [Some(key.as_str()), Some(wrong.as_str()), None] {
            let mut request = tonic::Request::new(v1::SearchRequest {
                query: "how do I deploy".into(),
                ..Default::default()
            });
            if let Some(k) = presented {
                request
                    .metadata_mut()
                    .insert("authorization", format!("Bearer {k}").parse().unwrap());
            }
            codes.push(match client.search(request).await {
                Ok(r) => {
                    assert!(!r.get_ref().results.is_empty());
                    tonic::Code::Ok
                }
                Err(status) => {
                    assert!(!status.message().contains(&key) && !status.message().contains(&wrong));
                    status.code()
                }
            });
        }
        codes
    });
    assert_eq!(
        codes,
        [
            tonic::Code::Ok,
            tonic::Code::Unauthenticated,
            tonic::Code::Unauthenticated
        ]
    );
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    serve.wait().unwrap();
    let serve_output = format!(
        "{}\n{}",
        rest.join("\n"),
        std::fs::read_to_string(&log).unwrap()
    );
    assert!(
        serve_output.contains("TRACE") || serve_output.contains("DEBUG"),
        "trace logging was on"
    );

    let mut outputs = vec![("weft serve (trace logs)".to_owned(), serve_output)];
    let status = weft(data.path(), &key)
        .args(["status", "--json"])
        .env("WEFT__QUERY__API_KEYS_FILE", &keys_file)
        .output()
        .unwrap();
    json(&status);
    outputs.push(("weft status --json".into(), text(&status)));
    for args in [
        vec!["--help"],
        vec!["serve", "--help"],
        vec!["mcp", "--help"],
        vec!["keys", "new", "--help"],
        vec!["status", "--help"],
    ] {
        let out = weft(data.path(), &key).args(&args).output().unwrap();
        outputs.push((format!("weft {}", args.join(" ")), text(&out)));
    }
    // A failing remote: the error names the URL, never the key.
    let out = weft(data.path(), &key)
        .args(["mcp", "--query-url", "http://127.0.0.1:1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    outputs.push(("weft mcp --query-url (unreachable)".into(), text(&out)));
    // weft serve on a public address without keys: refused, naming the setting.
    let out = weft(data.path(), &key)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("query.api_keys_file"), "{}", text(&out));
    outputs.push(("weft serve 0.0.0.0 without keys".into(), text(&out)));

    for (what, output) in &outputs {
        for secret in [
            key.as_str(),
            wrong.as_str(),
            QDRANT_SECRET,
            MEILI_SECRET,
            EMBEDDING_SECRET,
        ] {
            assert!(
                !output.contains(secret),
                "{what} printed a secret:\n{output}"
            );
        }
        println!("{what}: {} bytes, no secret", output.len());
    }
}

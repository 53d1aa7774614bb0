//! The binary's help and its start-up errors.

use std::process::Command;

fn bin() -> Command {
    // No NATS here: the live generation is read from the data directory.
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft-query"));
    command.env("WEFT__GENERATIONS__REGISTRY", "data_dir");
    command
}

#[test]
fn help_names_the_options() {
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("--listen") && text.contains("--data-dir"),
        "{text}"
    );
    assert!(text.contains("query.api_keys_file"), "{text}");
}

#[test]
fn errors_name_the_key_or_the_directory() {
    let out = bin()
        .env("WEFT__QUERY__LISTEN", "nowhere")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("query.listen"));
    let empty = tempfile::tempdir().unwrap();
    let out = bin()
        .arg("--data-dir")
        .arg(empty.path())
        .env("WEFT__QUERY__AUTH", "none")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains(&empty.path().display().to_string()), "{text}");
}

#[test]
fn without_a_keys_file_it_does_not_start_and_says_which_setting() {
    let empty = tempfile::tempdir().unwrap();
    let out = bin()
        .arg("--data-dir")
        .arg(empty.path())
        .env_remove("WEFT__QUERY__AUTH")
        .env_remove("WEFT__QUERY__API_KEYS_FILE")
        .current_dir(empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("query.api_keys_file") && text.contains("query.auth = \"none\""),
        "{text}"
    );
    // The check comes before the stores: the empty data directory is not
    // what it complains about.
    assert!(!text.contains("no index"), "{text}");
}

/// Secrets in the environment (an API key's holder, the store keys) are in
/// no output of weft-query: not at trace level, not in its errors.
#[test]
fn secrets_are_never_printed() {
    const QDRANT_SECRET: &str = "qdrant-secret-4f1c2a9e7b";
    const MEILI_SECRET: &str = "meili-secret-8d3e6b0c51";
    const MEILI_SEARCH_SECRET: &str = "meili-search-secret-2b7f";
    let dir = tempfile::tempdir().unwrap();
    let minted = weft_auth::mint("ops", vec!["p".into()], vec![]).unwrap();
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        toml::to_string(&weft_auth::KeysFile {
            keys: vec![minted.entry.clone()],
        })
        .unwrap(),
    )
    .unwrap();
    let run = |vector: &str, text: &str| {
        bin()
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .current_dir(dir.path())
            .env("WEFT_LOG", "trace")
            .env("WEFT_API_KEY", &minted.key)
            .env("WEFT__QUERY__API_KEYS_FILE", &keys)
            .env("WEFT__QUERY__LISTEN", "127.0.0.1:0")
            .env("WEFT__STORES__VECTOR", vector)
            .env("WEFT__STORES__QDRANT_URL", "http://127.0.0.1:9")
            .env("WEFT__STORES__QDRANT_API_KEY_ENV", "TEST_QDRANT_KEY")
            .env("TEST_QDRANT_KEY", QDRANT_SECRET)
            .env("WEFT__STORES__TEXT", text)
            .env("WEFT__STORES__MEILI_URL", "http://127.0.0.1:9")
            .env("WEFT__STORES__MEILI_API_KEY_ENV", "TEST_MEILI_KEY")
            .env("TEST_MEILI_KEY", MEILI_SECRET)
            .env(
                "WEFT__STORES__MEILI_SEARCH_KEY_ENV",
                "TEST_MEILI_SEARCH_KEY",
            )
            .env("TEST_MEILI_SEARCH_KEY", MEILI_SEARCH_SECRET)
            .env("WEFT__EMBEDDING__PROVIDER", "http")
            .env("WEFT__EMBEDDING__URL", "http://127.0.0.1:9")
            .env("WEFT__EMBEDDING__MODEL", "m")
            .env("WEFT__EMBEDDING__DIMENSION", "8")
            .output()
            .unwrap()
    };
    let mut outputs = vec![
        ("qdrant", run("qdrant", "embedded")),
        ("meilisearch", run("embedded", "meilisearch")),
        ("--help", bin().arg("--help").output().unwrap()),
    ];
    // A keys file with a key in plain text (a mistake) is refused without
    // quoting it.
    std::fs::write(
        &keys,
        format!("[[keys]]\nid = \"x\"\nkey = \"{}\"\n", minted.key),
    )
    .unwrap();
    outputs.push(("bad keys file", run("qdrant", "embedded")));
    for (what, out) in &outputs {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if *what != "--help" {
            assert!(!out.status.success(), "{what}: {text}");
        }
        for secret in [
            QDRANT_SECRET,
            MEILI_SECRET,
            MEILI_SEARCH_SECRET,
            minted.key.as_str(),
        ] {
            assert!(!text.contains(secret), "{what} printed a secret:\n{text}");
        }
        println!("{what}: {} bytes of output, no secret in it", text.len());
    }
    // They failed after reading the keys (opening the stores), not before.
    let qdrant = String::from_utf8_lossy(&outputs[0].1.stderr);
    assert!(qdrant.contains("requires API keys"), "{qdrant}");
    let bad = String::from_utf8_lossy(&outputs[3].1.stderr);
    assert!(bad.contains("query.api_keys_file"), "{bad}");
}

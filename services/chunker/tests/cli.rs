//! The binary's help and its start-up errors.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft-chunker"))
}

#[test]
fn help_names_the_settings() {
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("--nats-url") && text.contains("WEFT__"),
        "{text}"
    );
}

#[test]
fn a_bad_setting_is_named_at_start() {
    let out = bin().env("WEFT__NATS__MAX_DELIVER", "0").output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("nats.max_deliver"), "{text}");
}

#[test]
fn a_dead_nats_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = bin()
        .args(["--nats-url", &format!("nats://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("cannot connect to NATS"), "{text}");
}

#[test]
fn a_bad_trace_endpoint_is_named_at_start() {
    let out = bin()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("OTEL_EXPORTER_OTLP_ENDPOINT") && text.contains("not a url"),
        "{text}"
    );
}

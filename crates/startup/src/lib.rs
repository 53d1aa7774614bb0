//! # weft-startup
//!
//! What every weft service binary (`weft-crawler`, `weft-chunker`,
//! `weft-embedder`, `weft-query`) does around its own work, written once:
//!
//! 1. logging to stderr (`WEFT_LOG`) and OpenTelemetry traces over OTLP
//!    when `OTEL_EXPORTER_OTLP_ENDPOINT` is set;
//! 2. the configuration: defaults, then `--config FILE` (or `./weft.toml`),
//!    then `WEFT__…` variables, then the service's own flags
//!    ([`ConfigArgs`], [`NatsArgs`], [`LocationArgs`]);
//! 3. the Prometheus endpoint when `telemetry.metrics_listen` is set;
//! 4. a shutdown signal (SIGTERM from Kubernetes, or Ctrl-C) handed to the
//!    service, which finishes what it holds — a worker its fetched
//!    messages, the query service its requests in flight — and returns;
//! 5. one line on stderr for an error, with its causes, and the exit code.
//!
//! A service's `main` is then its flags and one call of [`run`]:
//!
//! ```no_run
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     config: weft_startup::ConfigArgs,
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let args = Args::parse();
//!     weft_startup::run("weft-example", "info", &args.config, |service| async move {
//!         service.shutdown.await;
//!         Ok(std::process::ExitCode::SUCCESS)
//!     })
//! }
//! ```

#![warn(missing_docs)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;

use weft_config::Locations;
use weft_config::WeftConfig;

/// `--config FILE`: every service has it, anywhere on its command line
/// (before or after a subcommand).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// Configuration file (default: ./weft.toml when it exists). Settings
    /// can also be given as WEFT__SECTION__KEY environment variables.
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// `--nats-url URL`: the services joined by NATS.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL (default: `nats.url`).
    #[arg(long, value_name = "URL", global = true)]
    pub nats_url: Option<String>,
}

impl NatsArgs {
    /// Applies the flag over the configuration.
    pub fn apply(&self, config: &mut WeftConfig) {
        if let Some(url) = &self.nats_url {
            config.nats.url = url.clone();
        }
    }
}

/// `--data-dir` and `--model-dir`: the services that open stores or the model.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LocationArgs {
    /// The data directory (default: `data.dir`, else the platform's).
    #[arg(long, env = "WEFT_DATA_DIR", value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// The local embedding model's directory (default:
    /// `embedding.model_dir`, else ~/.cache/weft/models/all-MiniLM-L6-v2).
    #[arg(long, env = "WEFT_MODEL_DIR", value_name = "DIR", global = true)]
    pub model_dir: Option<PathBuf>,
}

impl LocationArgs {
    /// The locations these flags and `config` give.
    pub fn resolve(&self, config: &WeftConfig) -> Locations {
        Locations::resolve(config, self.data_dir.clone(), self.model_dir.clone())
    }
}

/// What [`run`] hands the service.
pub struct Service {
    /// The service's name, as it logs and traces.
    pub name: &'static str,
    /// The layered, validated configuration.
    pub config: WeftConfig,
    /// Completes on SIGTERM or Ctrl-C: finish what is in hand and return.
    pub shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Service {
    /// A connection to the NATS server of `[nats]`, with weft's streams and
    /// the catalog bucket created if missing.
    pub async fn connect_nats(&self) -> Result<weft_nats::Jet, weft_nats::NatsError> {
        weft_nats::Jet::connect(&self.config.nats).await
    }
}

/// Runs the service `name`: sets up logging (`default_log` unless
/// `WEFT_LOG` says otherwise) and traces, loads the configuration, lets
/// `configure` apply the service's flags, serves metrics, then runs `body`
/// on a multi-threaded runtime until it returns. An error is printed with
/// its causes on one line, and the exit code is a failure.
pub fn run<F, Fut>(
    name: &'static str,
    default_log: &str,
    config_args: &ConfigArgs,
    body: F,
) -> ExitCode
where
    F: FnOnce(Service) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    run_with(name, default_log, config_args, |_| {}, body)
}

/// [`run`], with `configure` applying flags over the loaded configuration
/// before anything uses it.
pub fn run_with<F, Fut>(
    name: &'static str,
    default_log: &str,
    config_args: &ConfigArgs,
    configure: impl FnOnce(&mut WeftConfig),
    body: F,
) -> ExitCode
where
    F: FnOnce(Service) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    weft_telemetry::init_logging(default_log);
    let tracing = match weft_telemetry::trace::init_tracing(name) {
        Ok(tracing) => tracing,
        Err(error) => {
            eprintln!("{name}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = start(name, config_args, configure, body);
    // Spans still pending are exported before the process ends.
    tracing.shutdown();
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("{name}: {}", weft_core::error_chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn start<F, Fut>(
    name: &'static str,
    config_args: &ConfigArgs,
    configure: impl FnOnce(&mut WeftConfig),
    body: F,
) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Service) -> Fut,
    Fut: Future<Output = anyhow::Result<ExitCode>>,
{
    let mut config = weft_config::load(config_args.config.as_deref())?.config;
    configure(&mut config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if let Some(addr) = &config.telemetry.metrics_listen {
            let bound = weft_telemetry::serve_metrics(addr).await?;
            tracing::info!("metrics on http://{bound}/metrics");
        }
        tracing::info!("{name} started");
        let service = Service {
            name,
            config,
            shutdown: Box::pin(weft_telemetry::shutdown_signal()),
        };
        let code = body(service).await?;
        tracing::info!("{name} stopped");
        Ok(code)
    })
}

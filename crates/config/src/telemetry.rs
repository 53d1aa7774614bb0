//! `[telemetry]`: the metrics endpoint of the services.

use serde::{Deserialize, Serialize};

use crate::InvalidSetting;
use crate::error::check_socket_addr;

/// `[telemetry]`: what every service exposes for operations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Address of the Prometheus `/metrics` endpoint (e.g. `0.0.0.0:9090`);
    /// none when unset.
    pub metrics_listen: Option<String>,
}

impl TelemetryConfig {
    /// Checks the section: the metrics address, when set, is a socket address.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(addr) = &self.metrics_listen {
            check_socket_addr("telemetry.metrics_listen", addr)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::assert_refused;

    #[test]
    fn bad_settings_are_named_by_key() {
        assert_refused(&[(
            "[telemetry]\nmetrics_listen = \"nine\"\n",
            "telemetry.metrics_listen",
        )]);
    }
}

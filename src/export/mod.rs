//! Where `kdiag watch`'s scans go, each beside the command that wires it:
//! the OTLP/HTTP sender on a thread of its own (otlp.rs), the /metrics
//! listener (serve.rs), node_exporter's textfile written atomically
//! (textfile.rs), and the flight recorder (flight.rs: diagnose's engine
//! run on a group whose verdict turned bad, its record and report kept).
//! The formats themselves are render/'s (metrics.rs, prometheus.rs,
//! otlp.rs).

pub mod flight;
pub mod otlp;
pub mod profiles;
pub mod sender;
pub mod serve;
pub mod textfile;

//! `--config FILE`: watch's options in a TOML file, one key per long option
//! (`interval = 5`, `group-by = "cgroup"`, `flight-dir = "/var/lib/kdiag"`),
//! read again on SIGHUP. The keys become the command line's words and go
//! through the same parser, so a file means exactly what the options mean
//! and is checked the same way.

use std::path::Path;

use clap::{FromArgMatches as _, Parser};

use super::Args;
use crate::error;
use crate::user_files::{self, Limits};

/// Only these may be in a file: `config` and `duration` are the command
/// line's.
#[derive(Parser)]
#[command(name = "kdiag watch", no_binary_name = true)]
struct FromFile {
    #[command(flatten)]
    args: Args,
}

/// The options in `path` (read as the user), checked as the command line's.
pub fn load(path: &Path) -> anyhow::Result<Args> {
    let text = user_files::read_to_string(path, &Limits::input())?;
    parse(&text).map_err(|e| error::usage(format!("{}: {e}", path.display())))
}

fn parse(text: &str) -> Result<Args, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.message().to_string())?;
    let mut words = Vec::new();
    for (key, value) in table {
        if matches!(key.as_str(), "config" | "duration") {
            return Err(format!("{key} is an option of the command line only"));
        }
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => {
                return Err(format!(
                    "{key} = {other}: give a string or a number, as the option --{key} takes"
                ));
            }
        };
        words.push(format!("--{key}"));
        words.push(value);
    }
    let matches = <FromFile as clap::CommandFactory>::command()
        .try_get_matches_from(&words)
        .map_err(|e| {
            // clap's message names the option; the first line is enough.
            let text = e.to_string();
            let line = text
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            line.replace("'--", "'").to_string()
        })?;
    FromFile::from_arg_matches(&matches)
        .map(|f| f.args)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_options() {
        let a = parse(
            "interval = 2\ngroup-by = \"cgroup\"\ntop = 5\nflight-dir = \"/var/lib/kdiag\"\nrecord-after = \"1m\"\n",
        )
        .unwrap();
        assert_eq!(a.interval, 2.0);
        assert_eq!(a.top, 5);
        assert_eq!(a.record_after, 60.0);
        assert_eq!(a.flight_dir.as_deref(), Some(Path::new("/var/lib/kdiag")));
        // Defaults as on the command line.
        assert_eq!(parse("").unwrap().interval, 5.0);
    }

    #[test]
    fn the_packaged_file_parses() {
        let a = parse(include_str!("../../../packaging/watch.toml")).unwrap();
        assert_eq!(
            a.flight_dir.as_deref(),
            Some(Path::new("/var/lib/kdiag/flight"))
        );
        assert_eq!(a.flight_max_size, 100 << 20);
    }

    #[test]
    fn bad_files_say_which_key() {
        assert!(
            parse("interval = 0.5")
                .unwrap_err()
                .contains("at least 1 second")
        );
        assert!(parse("bogus = 1").unwrap_err().contains("bogus"));
        assert!(
            parse("duration = 5")
                .unwrap_err()
                .contains("command line only")
        );
        assert!(parse("top = [1]").unwrap_err().contains("top"));
        assert!(parse("interval = ").is_err());
    }
}

//! `--textfile DIR`: the exposition written to DIR/kdiag.prom for
//! node_exporter's textfile collector, atomically (a temporary file in the
//! same directory, renamed over it) and as the user who ran sudo, like
//! every file kdiag writes where a user says. The collector reads only
//! `*.prom`, so it never sees the temporary `.kdiag.prom.tmp`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::user_files;

pub struct Textfile {
    path: PathBuf,
    temp: PathBuf,
}

impl Textfile {
    /// Make `dir` (as the user, like every directory a user names), and
    /// remove a temporary file a killed kdiag left there.
    pub fn new(dir: &Path) -> anyhow::Result<Textfile> {
        user_files::create_dir_all(dir)?;
        let t = Textfile {
            path: dir.join("kdiag.prom"),
            temp: dir.join(".kdiag.prom.tmp"),
        };
        user_files::remove_file(&t.temp)?;
        Ok(t)
    }

    pub fn write(&self, text: &str) -> anyhow::Result<()> {
        let written = user_files::write(&self.temp, text)
            .and_then(|()| user_files::rename(&self.temp, &self.path));
        if written.is_err() {
            let _ = user_files::remove_file(&self.temp);
        }
        written.with_context(|| format!("writing {}", self.path.display()))
    }
}

impl Drop for Textfile {
    fn drop(&mut self) {
        let _ = user_files::remove_file(&self.temp);
    }
}

//! The profile files a user may ask profile and offcpu for (`--folded --svg
//! --pprof --speedscope`): the flags, one clap group both commands flatten,
//! and the bytes of each file asked for. The command writes them as the user.

use std::path::{Path, PathBuf};

use crate::model::profile::Profile;
use crate::model::stacks::StackSet;
use crate::model::wall::Wall;
use crate::render;

#[derive(Debug, Default, clap::Args)]
pub struct ProfileFiles {
    /// Write folded stacks (`comm;outer;...;inner weight`) for inferno or FlameGraph
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write an SVG flame graph (width = samples, or time blocked for offcpu)
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write a gzip'd pprof profile (go tool pprof, Parca, Pyroscope, Grafana)
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write a speedscope JSON profile (speedscope.app; the Firefox Profiler imports it too)
    #[arg(long, value_name = "FILE")]
    pub speedscope: Option<PathBuf>,
}

impl ProfileFiles {
    /// Some file was asked for (each needs stacks).
    pub fn any(&self) -> bool {
        self.folded.is_some()
            || self.svg.is_some()
            || self.pprof.is_some()
            || self.speedscope.is_some()
    }

    /// Each file asked for with its bytes: `folded` is the profile's folded
    /// stacks; pprof and speedscope weigh it by its unit (`StackSet::of`).
    pub fn render<'a>(
        &'a self,
        profile: &Profile,
        folded: &[String],
    ) -> anyhow::Result<Vec<(&'a Path, Vec<u8>)>> {
        let mut out = Vec::new();
        if let Some(path) = &self.folded {
            let mut text = folded.join("\n");
            text.push('\n');
            out.push((path.as_path(), text.into_bytes()));
        }
        if let Some(path) = &self.svg {
            out.push((path.as_path(), render::flamegraph::svg(profile, folded)?));
        }
        if let Some(path) = &self.pprof {
            out.push((
                path.as_path(),
                render::pprof::gzipped(&StackSet::of(profile))?,
            ));
        }
        if let Some(path) = &self.speedscope {
            out.push((
                path.as_path(),
                render::speedscope::json(&StackSet::of(profile))?,
            ));
        }
        Ok(out)
    }

    /// The files asked for, of a wall-clock profile (`kdiag profile --wall`).
    pub fn render_wall<'a>(&'a self, wall: &Wall) -> anyhow::Result<Vec<(&'a Path, Vec<u8>)>> {
        let mut out = Vec::new();
        if let Some(path) = &self.folded {
            let mut text = render::wall::folded(wall).join("\n");
            text.push('\n');
            out.push((path.as_path(), text.into_bytes()));
        }
        if let Some(path) = &self.svg {
            out.push((path.as_path(), render::wall::svg(wall)?));
        }
        if let Some(path) = &self.pprof {
            out.push((path.as_path(), render::pprof::wall_gzipped(wall)?));
        }
        if let Some(path) = &self.speedscope {
            out.push((path.as_path(), render::speedscope::wall_json(wall)?));
        }
        Ok(out)
    }
}

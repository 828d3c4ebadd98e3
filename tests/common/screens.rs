//! Screen snapshots for the ratatui views: a frame drawn on a TestBackend
//! as text, compared with tests/data/FOLDER/NAME.txt (`KDIAG_BLESS=1`
//! writes it instead).

use ratatui::Frame;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The text of a frame drawn at `w` x `h`.
pub fn text(w: u16, h: u16, draw: impl FnOnce(&mut Frame)) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(draw).unwrap();
    let buf = term.backend().buffer();
    (0..h)
        .map(|y| {
            let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
            line.trim_end().to_string() + "\n"
        })
        .collect()
}

/// Draw at `w` x `h`, and compare the text with its snapshot.
pub fn snapshot(folder: &str, name: &str, w: u16, h: u16, draw: impl FnOnce(&mut Frame)) -> String {
    let text = text(w, h, draw);
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(folder)
        .join(format!("{name}.txt"));
    if std::env::var_os("KDIAG_BLESS").is_some() {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &text).unwrap();
    }
    let want = std::fs::read_to_string(&file)
        .unwrap_or_else(|_| panic!("no snapshot {}: run with KDIAG_BLESS=1", file.display()));
    assert_eq!(
        text,
        want,
        "screen {name} differs from {}:\n{text}",
        file.display()
    );
    text
}

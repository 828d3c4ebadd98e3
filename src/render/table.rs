//! Plain-text tables with aligned columns, as ps, iosnoop and doctor print.

use std::io::{self, Write};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table built row by row and written once its column widths are known.
/// The last column is never padded, so long commands are not followed by blanks.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Self {
        Table {
            columns: columns.into_iter().map(|(n, a)| (n.into(), a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Add a row; it must have one cell per column.
    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.columns.len(), "row width");
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .map(|(n, _)| n.chars().count())
            .collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let header: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
        self.write_line(out, &header, &widths)?;
        for row in &self.rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            self.write_line(out, &cells, &widths)?;
        }
        Ok(())
    }

    fn write_line(&self, out: &mut impl Write, cells: &[&str], widths: &[usize]) -> io::Result<()> {
        let last = cells.len().saturating_sub(1);
        let mut line = String::new();
        for (i, (cell, (&width, (_, align)))) in cells
            .iter()
            .zip(widths.iter().zip(&self.columns))
            .enumerate()
        {
            if i > 0 {
                line.push(' ');
            }
            let pad = width.saturating_sub(cell.chars().count());
            match align {
                Align::Right => {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                }
                Align::Left if i == last => line.push_str(cell),
                Align::Left => {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
        writeln!(out, "{line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns_and_leaves_last_unpadded() {
        let mut t = Table::new([("PID", Align::Right), ("COMMAND", Align::Left)]);
        t.push(vec!["1".into(), "init".into()]);
        t.push(vec!["4242".into(), "io-app --size 10".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            " PID COMMAND\n   1 init\n4242 io-app --size 10\n"
        );
    }
}

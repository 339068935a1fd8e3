//! Loss curves as a PNG, drawn pixel by pixel (no font or system library): the training loss in
//! blue, the validation loss in orange with a dot at each evaluation, grid lines at round
//! values, and tick labels in a built-in 3x5 pixel font.

use std::path::Path;

use crate::checkpoint::CheckpointError;
use crate::metrics::IterMetrics;

const WIDTH: usize = 800;
const HEIGHT: usize = 480;
const LEFT: usize = 70;
const RIGHT: usize = 20;
const TOP: usize = 30;
const BOTTOM: usize = 40;
/// Each font pixel is drawn as a `SCALE x SCALE` square.
const SCALE: usize = 2;

type Rgb = [u8; 3];
const WHITE: Rgb = [255, 255, 255];
const AXIS: Rgb = [90, 90, 90];
const GRID: Rgb = [225, 225, 225];
const TEXT: Rgb = [40, 40, 40];
const TRAIN_COLOR: Rgb = [31, 119, 180];
const VAL_COLOR: Rgb = [255, 127, 14];

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Writing the PNG file (atomically) failed.
    #[error(transparent)]
    Write(#[from] CheckpointError),
    /// Trident was built without its `plots` feature, which encodes the PNG; nothing was
    /// written.
    #[error("trident was built without its `plots` feature, which writes PNG pictures; rebuild with `--features plots`")]
    NoPlots,
}

/// Writes the loss curves of `metrics` to `path` (atomically).
pub fn plot_metrics(path: &Path, metrics: &[IterMetrics]) -> Result<(), PlotError> {
    let train: Vec<(f64, f64)> = metrics.iter().map(|m| (m.iter as f64, f64::from(m.loss))).collect();
    let val: Vec<(f64, f64)> =
        metrics.iter().filter_map(|m| Some((m.iter as f64, f64::from(m.val_loss?)))).collect();
    write_loss_plot(path, &train, &val)
}

/// Writes `(iteration, loss)` series to a PNG at `path`. Non-finite points are skipped.
pub fn write_loss_plot(path: &Path, train: &[(f64, f64)], val: &[(f64, f64)]) -> Result<(), PlotError> {
    let canvas = render(train, val);
    write_png(path, WIDTH, HEIGHT, &canvas.pixels)
}

/// Writes `pixels`, `width` x `height` 8-bit RGB pixels row by row from the top, to a PNG at
/// `path` (atomically).
#[cfg(feature = "plots")]
pub fn write_png(path: &Path, width: usize, height: usize, pixels: &[u8]) -> Result<(), PlotError> {
    use std::io::Write;

    crate::checkpoint::write_file_atomically(path, |w| {
        let mut encoder = png::Encoder::new(&mut *w, width as u32, height as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(std::io::Error::other)?;
        writer.write_image_data(pixels).map_err(std::io::Error::other)?;
        writer.finish().map_err(std::io::Error::other)?;
        w.flush()
    })?;
    Ok(())
}

/// Without the `plots` feature: [`PlotError::NoPlots`], and nothing is written.
#[cfg(not(feature = "plots"))]
pub fn write_png(_path: &Path, _width: usize, _height: usize, _pixels: &[u8]) -> Result<(), PlotError> {
    Err(PlotError::NoPlots)
}

struct Canvas {
    pixels: Vec<u8>,
}

impl Canvas {
    fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if (0..WIDTH as i64).contains(&x) && (0..HEIGHT as i64).contains(&y) {
            let i = 3 * (y as usize * WIDTH + x as usize);
            self.pixels[i..i + 3].copy_from_slice(&c);
        }
    }

    fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    /// A two-pixel-wide line (Bresenham).
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.rect(x, y, 2, 2, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text in the 3x5 font; unknown characters are left blank.
    fn text(&mut self, x: i64, y: i64, s: &str, c: Rgb) {
        let step = 4 * SCALE as i64;
        for (i, ch) in s.chars().enumerate() {
            let Some(rows) = glyph(ch) else { continue };
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..3 {
                    if bits & (0b100 >> col) != 0 {
                        self.rect(
                            x + i as i64 * step + col * SCALE as i64,
                            y + (r * SCALE) as i64,
                            SCALE as i64,
                            SCALE as i64,
                            c,
                        );
                    }
                }
            }
        }
    }
}

fn text_width(s: &str) -> i64 {
    (s.chars().count() * 4 * SCALE) as i64 - SCALE as i64
}

/// Rows of a 3x5 glyph, bit 2 = left column.
fn glyph(ch: char) -> Option<[u8; 5]> {
    Some(match ch {
        '0' => [0b111, 0b101, 0b101, 0b101, 0b111],
        '1' => [0b010, 0b110, 0b010, 0b010, 0b111],
        '2' => [0b111, 0b001, 0b111, 0b100, 0b111],
        '3' => [0b111, 0b001, 0b111, 0b001, 0b111],
        '4' => [0b101, 0b101, 0b111, 0b001, 0b001],
        '5' => [0b111, 0b100, 0b111, 0b001, 0b111],
        '6' => [0b111, 0b100, 0b111, 0b101, 0b111],
        '7' => [0b111, 0b001, 0b001, 0b001, 0b001],
        '8' => [0b111, 0b101, 0b111, 0b101, 0b111],
        '9' => [0b111, 0b101, 0b111, 0b001, 0b111],
        '.' => [0b000, 0b000, 0b000, 0b000, 0b010],
        '-' => [0b000, 0b000, 0b111, 0b000, 0b000],
        'a' => [0b000, 0b011, 0b101, 0b101, 0b011],
        'e' => [0b000, 0b010, 0b111, 0b100, 0b011],
        'i' => [0b010, 0b000, 0b010, 0b010, 0b010],
        'l' => [0b110, 0b010, 0b010, 0b010, 0b111],
        'n' => [0b000, 0b110, 0b101, 0b101, 0b101],
        'o' => [0b000, 0b010, 0b101, 0b101, 0b010],
        'p' => [0b000, 0b110, 0b101, 0b110, 0b100],
        'r' => [0b000, 0b110, 0b101, 0b100, 0b100],
        's' => [0b000, 0b011, 0b110, 0b001, 0b110],
        't' => [0b010, 0b111, 0b010, 0b010, 0b011],
        'v' => [0b000, 0b101, 0b101, 0b101, 0b010],
        _ => return None,
    })
}

/// Round tick values covering `[lo, hi]` (steps of 1, 2 or 5 times a power of ten).
fn ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, usize) {
    let raw = (hi - lo) / target as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    ((first..=last).map(|k| k as f64 * step).collect(), decimals)
}

fn finite(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite())
}

fn render(train: &[(f64, f64)], val: &[(f64, f64)]) -> Canvas {
    let mut c = Canvas { pixels: WHITE.repeat(WIDTH * HEIGHT) };
    let all: Vec<(f64, f64)> = finite(train).chain(finite(val)).collect();
    let fold =
        |f: fn(f64, f64) -> f64, init: f64, pick: fn(&(f64, f64)) -> f64| all.iter().map(pick).fold(init, f);
    let (mut x0, mut x1) =
        (fold(f64::min, f64::INFINITY, |p| p.0), fold(f64::max, f64::NEG_INFINITY, |p| p.0));
    let (mut y0, mut y1) =
        (fold(f64::min, f64::INFINITY, |p| p.1), fold(f64::max, f64::NEG_INFINITY, |p| p.1));
    if all.is_empty() {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1.0 {
        x1 = x0 + 1.0;
    }
    let pad = ((y1 - y0) * 0.05).max(1e-3);
    (y0, y1) = (y0 - pad, y1 + pad);

    let (pw, ph) = ((WIDTH - LEFT - RIGHT) as f64, (HEIGHT - TOP - BOTTOM) as f64);
    let px = |x: f64| LEFT as i64 + ((x - x0) / (x1 - x0) * pw).round() as i64;
    let py = |y: f64| TOP as i64 + ((y1 - y) / (y1 - y0) * ph).round() as i64;
    let (left, right, top, bottom) =
        (LEFT as i64, (WIDTH - RIGHT) as i64, TOP as i64, (HEIGHT - BOTTOM) as i64);

    let (yticks, ydec) = ticks(y0, y1, 6);
    for y in yticks {
        c.rect(left, py(y), right - left, 1, GRID);
        let label = format!("{y:.ydec$}");
        c.text(left - 8 - text_width(&label), py(y) - 5, &label, TEXT);
    }
    let (xticks, xdec) = ticks(x0, x1, 8);
    for x in xticks {
        c.rect(px(x), top, 1, bottom - top, GRID);
        let label = format!("{x:.xdec$}");
        c.text(px(x) - text_width(&label) / 2, bottom + 8, &label, TEXT);
    }
    c.rect(left, top, 1, bottom - top + 1, AXIS);
    c.rect(left, bottom, right - left + 1, 1, AXIS);
    c.text(right - text_width("step"), bottom + 24, "step", TEXT);
    c.text(left - 60, 8, "loss", TEXT);

    for (series, color) in [(train, TRAIN_COLOR), (val, VAL_COLOR)] {
        let pts: Vec<(i64, i64)> = finite(series).map(|(x, y)| (px(x), py(y))).collect();
        for w in pts.windows(2) {
            c.line(w[0], w[1], color);
        }
        if color == VAL_COLOR || pts.len() == 1 {
            for &(x, y) in &pts {
                c.rect(x - 2, y - 2, 5, 5, color);
            }
        }
    }

    // Legend, top right.
    let mut lx = right - 150;
    for (name, color) in [("train", TRAIN_COLOR), ("val", VAL_COLOR)] {
        c.rect(lx, 14, 16, 3, color);
        c.text(lx + 22, 11, name, TEXT);
        lx += 22 + text_width(name) + 20;
    }
    c
}

#[cfg(all(test, not(feature = "plots")))]
mod tests_without_plots {
    use super::*;

    #[test]
    fn without_the_feature_no_png_is_written_and_the_error_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loss.png");
        let e = write_loss_plot(&path, &[(0.0, 2.0), (1.0, 1.0)], &[]).unwrap_err();
        assert!(matches!(e, PlotError::NoPlots));
        assert!(e.to_string().contains("`plots` feature"), "{e}");
        assert!(!path.exists());
    }
}

#[cfg(all(test, feature = "plots"))]
mod tests {
    use super::*;

    fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn count(pixels: &[u8], color: Rgb) -> usize {
        pixels.chunks(3).filter(|p| *p == color).count()
    }

    #[test]
    fn draws_both_curves_where_the_data_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loss.png");
        let train: Vec<(f64, f64)> =
            (0..200).map(|i| (i as f64, 3.0 * (-(i as f64) / 50.0).exp() + 0.5)).collect();
        let val = vec![(50.0, 1.4), (100.0, 0.95), (150.0, f64::NAN), (199.0, 0.6)];
        write_loss_plot(&path, &train, &val).unwrap();
        let (w, h, px) = decode(&path);
        assert_eq!((w, h), (WIDTH as u32, HEIGHT as u32));
        assert!(count(&px, TRAIN_COLOR) > 500);
        assert!(count(&px, VAL_COLOR) > 50);
        // The first training point (highest loss) is at the top left of the plot area, so the
        // top-left quadrant has training pixels and the top-right quadrant has none.
        let quadrant = |x0: usize, y0: usize| {
            (y0..y0 + (HEIGHT - TOP - BOTTOM) / 2)
                .flat_map(|y| (x0..x0 + (WIDTH - LEFT - RIGHT) / 2).map(move |x| (x, y)))
                .filter(|&(x, y)| px[3 * (y * WIDTH + x)..3 * (y * WIDTH + x) + 3] == TRAIN_COLOR)
                .count()
        };
        assert!(quadrant(LEFT + 2, TOP + 2) > 0);
        assert_eq!(quadrant(LEFT + (WIDTH - LEFT - RIGHT) / 2 + 2, TOP + 30), 0);
    }

    #[test]
    fn empty_and_degenerate_inputs_still_make_a_picture() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loss.png");
        write_loss_plot(&path, &[], &[]).unwrap();
        write_loss_plot(&path, &[(3.0, 2.0)], &[]).unwrap();
        let (_, _, px) = decode(&path);
        assert!(count(&px, TRAIN_COLOR) > 0);
        let m = IterMetrics {
            iter: 1,
            loss: f32::NAN,
            lr: 0.0,
            grad_norm: 0.0,
            tokens_per_s: 0.0,
            val_loss: None,
            loss_scale: None,
            skipped: false,
        };
        plot_metrics(&path, &[m]).unwrap();
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let (t, dec) = ticks(0.37, 4.21, 6);
        assert_eq!(t, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(dec, 0);
        let (t, dec) = ticks(1.93, 2.31, 6);
        assert_eq!(t.len(), 4);
        assert!((t[0] - 2.0).abs() < 1e-12 && (t[3] - 2.3).abs() < 1e-12, "{t:?}");
        assert_eq!(dec, 1);
        let (t, dec) = ticks(0.0, 5000.0, 8);
        assert_eq!((t[1], dec), (1000.0, 0));
    }
}

//! The plan's two pictures, drawn pixel by pixel into PNGs: the memory per GPU of the chosen
//! layouts by component, and one iteration's pipeline timeline with its bubbles.

use trident_hardware::GIB;

use super::{Plan, Problem};
use crate::schedule::{simulate, simulate_interleaved, Action, Interleaved, Schedule};

type Rgb = [u8; 3];
const WHITE: Rgb = [255, 255, 255];
const TEXT: Rgb = [30, 30, 30];
const AXIS: Rgb = [120, 120, 120];
/// A stage waiting: the bubble.
pub const IDLE: Rgb = [232, 232, 232];
/// A stage computing a forward.
pub const FORWARD: Rgb = [66, 133, 244];
/// A stage computing a backward.
pub const BACKWARD: Rgb = [52, 168, 83];
/// The DP reduction and the optimizer step after the pipeline drains.
pub const AFTER: Rgb = [251, 188, 4];
/// The GPU's memory capacity line.
pub const LIMIT: Rgb = [220, 20, 20];
/// Memory components, in [`super::Memory::components`] order.
pub const COMPONENT_COLORS: [Rgb; 6] =
    [[66, 133, 244], [52, 168, 83], [251, 188, 4], [234, 67, 53], [155, 89, 182], [150, 150, 150]];
const SCALE: i64 = 2;

/// An RGB image being drawn.
pub struct Canvas {
    /// Pixels across.
    pub width: usize,
    /// Pixels down.
    pub height: usize,
    /// `width x height` RGB triples, row by row.
    pub pixels: Vec<u8>,
}

impl Canvas {
    /// A white canvas.
    pub fn new(width: usize, height: usize) -> Self {
        Self { width, height, pixels: WHITE.repeat(width * height) }
    }

    fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y.max(0)..(y + h).min(self.height as i64) {
            for xx in x.max(0)..(x + w).min(self.width as i64) {
                let i = 3 * (yy as usize * self.width + xx as usize);
                self.pixels[i..i + 3].copy_from_slice(&c);
            }
        }
    }

    /// Text in a 3x5 pixel font (lower case; unknown characters blank).
    fn text(&mut self, x: i64, y: i64, s: &str, c: Rgb) {
        for (i, ch) in s.chars().enumerate() {
            let Some(rows) = glyph(ch.to_ascii_lowercase()) else { continue };
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..3 {
                    if bits & (0b100 >> col) != 0 {
                        self.rect(
                            x + i as i64 * 4 * SCALE + col * SCALE,
                            y + r as i64 * SCALE,
                            SCALE,
                            SCALE,
                            c,
                        );
                    }
                }
            }
        }
    }

    /// The colour at `(x, y)`.
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        let i = 3 * (y * self.width + x);
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }
}

/// Rows of a 3x5 glyph, top first; bit 2 is the left column.
fn glyph(ch: char) -> Option<[u8; 5]> {
    const G: &[(char, [u8; 5])] = &[
        ('a', [0b010, 0b101, 0b111, 0b101, 0b101]),
        ('b', [0b110, 0b101, 0b110, 0b101, 0b110]),
        ('c', [0b011, 0b100, 0b100, 0b100, 0b011]),
        ('d', [0b110, 0b101, 0b101, 0b101, 0b110]),
        ('e', [0b111, 0b100, 0b110, 0b100, 0b111]),
        ('f', [0b111, 0b100, 0b110, 0b100, 0b100]),
        ('g', [0b011, 0b100, 0b101, 0b101, 0b011]),
        ('h', [0b101, 0b101, 0b111, 0b101, 0b101]),
        ('i', [0b111, 0b010, 0b010, 0b010, 0b111]),
        ('j', [0b001, 0b001, 0b001, 0b101, 0b010]),
        ('k', [0b101, 0b101, 0b110, 0b101, 0b101]),
        ('l', [0b100, 0b100, 0b100, 0b100, 0b111]),
        ('m', [0b101, 0b111, 0b111, 0b101, 0b101]),
        ('n', [0b110, 0b101, 0b101, 0b101, 0b101]),
        ('o', [0b010, 0b101, 0b101, 0b101, 0b010]),
        ('p', [0b110, 0b101, 0b110, 0b100, 0b100]),
        ('q', [0b010, 0b101, 0b101, 0b110, 0b011]),
        ('r', [0b110, 0b101, 0b110, 0b101, 0b101]),
        ('s', [0b011, 0b100, 0b010, 0b001, 0b110]),
        ('t', [0b111, 0b010, 0b010, 0b010, 0b010]),
        ('u', [0b101, 0b101, 0b101, 0b101, 0b111]),
        ('v', [0b101, 0b101, 0b101, 0b101, 0b010]),
        ('w', [0b101, 0b101, 0b111, 0b111, 0b101]),
        ('x', [0b101, 0b101, 0b010, 0b101, 0b101]),
        ('y', [0b101, 0b101, 0b010, 0b010, 0b010]),
        ('z', [0b111, 0b001, 0b010, 0b100, 0b111]),
        ('0', [0b111, 0b101, 0b101, 0b101, 0b111]),
        ('1', [0b010, 0b110, 0b010, 0b010, 0b111]),
        ('2', [0b110, 0b001, 0b010, 0b100, 0b111]),
        ('3', [0b110, 0b001, 0b010, 0b001, 0b110]),
        ('4', [0b101, 0b101, 0b111, 0b001, 0b001]),
        ('5', [0b111, 0b100, 0b110, 0b001, 0b110]),
        ('6', [0b011, 0b100, 0b111, 0b101, 0b111]),
        ('7', [0b111, 0b001, 0b010, 0b010, 0b010]),
        ('8', [0b111, 0b101, 0b111, 0b101, 0b111]),
        ('9', [0b111, 0b101, 0b111, 0b001, 0b110]),
        ('.', [0b000, 0b000, 0b000, 0b000, 0b010]),
        ('-', [0b000, 0b000, 0b111, 0b000, 0b000]),
        (':', [0b000, 0b010, 0b000, 0b010, 0b000]),
        ('/', [0b001, 0b001, 0b010, 0b100, 0b100]),
        ('%', [0b101, 0b001, 0b010, 0b100, 0b101]),
        ('(', [0b010, 0b100, 0b100, 0b100, 0b010]),
        (')', [0b010, 0b001, 0b001, 0b001, 0b010]),
        ('+', [0b000, 0b010, 0b111, 0b010, 0b000]),
        ('=', [0b000, 0b111, 0b000, 0b111, 0b000]),
        (',', [0b000, 0b000, 0b000, 0b010, 0b100]),
        ('_', [0b000, 0b000, 0b000, 0b000, 0b111]),
    ];
    G.iter().find(|(c, _)| *c == ch).map(|(_, rows)| *rows)
}

const LABEL_W: i64 = 300;
const PLOT_W: i64 = 760;
const ROW_H: i64 = 28;
const TOP: i64 = 60;

/// Stacked bars, one per plan: memory per GPU by component, with the GPU's capacity as a red
/// line. Bar `i`'s pixels span `[LABEL_W, LABEL_W + PLOT_W * total / scale)` on its row.
pub fn memory_picture(plans: &[&Plan]) -> Canvas {
    let rows = plans.len().max(1) as i64;
    let height = (TOP + rows * ROW_H + 40) as usize;
    let mut c = Canvas::new((LABEL_W + PLOT_W + 40) as usize, height);
    let limit = plans.first().map_or(1.0, |p| p.memory_limit);
    let most = plans.iter().map(|p| p.memory.total()).fold(limit, f64::max);
    let scale = most * 1.05;
    c.text(10, 8, "memory per gpu by component (gib); red line: the gpu capacity", TEXT);
    let names = ["parameters", "gradients", "optimizer", "activations", "comm buffers", "reserved"];
    let mut x = 10;
    for (name, color) in names.iter().zip(COMPONENT_COLORS) {
        c.rect(x, 30, 12, 12, color);
        c.text(x + 16, 31, name, TEXT);
        x += 16 + 8 * name.len() as i64 + 24;
    }
    for (i, p) in plans.iter().enumerate() {
        let y = TOP + i as i64 * ROW_H;
        c.text(10, y + 7, &p.layout.label(), TEXT);
        let mut x0 = 0.0;
        for ((_, bytes), color) in p.memory.components().iter().zip(COMPONENT_COLORS) {
            let a = LABEL_W + (PLOT_W as f64 * x0 / scale).round() as i64;
            x0 += bytes;
            let b = LABEL_W + (PLOT_W as f64 * x0 / scale).round() as i64;
            c.rect(a, y + 2, b - a, ROW_H - 6, color);
        }
        let end = LABEL_W + (PLOT_W as f64 * x0 / scale).round() as i64;
        c.text(end + 4, y + 7, &format!("{:.1}", p.memory.total() / GIB), TEXT);
    }
    let lx = LABEL_W + (PLOT_W as f64 * limit / scale).round() as i64;
    c.rect(lx, TOP - 4, 2, rows * ROW_H + 4, LIMIT);
    c.rect(LABEL_W, TOP + rows * ROW_H, PLOT_W, 1, AXIS);
    c.text(lx - 20, TOP + rows * ROW_H + 8, &format!("{:.0} gib", limit / GIB), LIMIT);
    c
}

/// Per stage, `(backward, start, end)` of every computation of one iteration.
pub type StageSpans = Vec<Vec<(bool, f64, f64)>>;

/// The spans of one iteration and its makespan, from the schedule simulation with the plan's
/// stage times.
pub fn spans(plan: &Plan) -> Result<(StageSpans, f64), String> {
    let l = &plan.layout;
    if l.virtual_stages > 1 {
        let s = Interleaved::new(l.pp, plan.micro_batches, l.virtual_stages)?;
        let t = simulate_interleaved(&s, plan.stage_forward, plan.stage_backward)?;
        let rows = t.spans.iter().map(|r| r.iter().map(|(s, a, b)| (s.backward, *a, *b)).collect()).collect();
        Ok((rows, t.makespan))
    } else {
        let t = simulate(
            &Schedule::one_f_one_b(l.pp, plan.micro_batches),
            plan.stage_forward,
            plan.stage_backward,
        )?;
        let rows = t
            .spans
            .iter()
            .map(|r| r.iter().map(|(a, s, e)| (matches!(a, Action::Backward(_)), *s, *e)).collect())
            .collect();
        Ok((rows, t.makespan))
    }
}

/// One iteration per stage row: forwards blue, backwards green, waiting grey (the bubble), and
/// the exposed DP reduction and optimizer step after the pipeline drains in yellow. Time runs
/// left to right over `PLOT_W` pixels from `LABEL_W`.
pub fn timeline_picture(problem: &Problem, plan: &Plan) -> Result<Canvas, String> {
    let (rows, makespan) = spans(plan)?;
    let total = plan.time.total.max(makespan);
    let stages = rows.len() as i64;
    let row_h = if stages > 32 { 8 } else { 20 };
    let height = (TOP + stages * row_h + 50) as usize;
    let mut c = Canvas::new((LABEL_W + PLOT_W + 40) as usize, height);
    c.text(
        10,
        8,
        &format!(
            "{}: one iteration, {} micro-batches, {} per iteration",
            plan.layout.label(),
            plan.micro_batches,
            super::search::seconds(plan.time.total)
        ),
        TEXT,
    );
    c.text(
        10,
        30,
        &format!(
            "{} on {} x {}; bubble {:.1}% of the iteration",
            problem.model.name,
            problem.cluster.world(),
            problem.cluster.gpu.name,
            100.0 * plan.time.bubble / plan.time.total
        ),
        TEXT,
    );
    let px = |t: f64| LABEL_W + (PLOT_W as f64 * t / total).round() as i64;
    for (r, spans) in rows.iter().enumerate() {
        let y = TOP + r as i64 * row_h;
        if row_h >= 12 || r % 8 == 0 {
            c.text(10, y + (row_h - 10) / 2, &format!("stage {r}"), TEXT);
        }
        c.rect(px(0.0), y + 1, px(makespan) - px(0.0), row_h - 2, IDLE);
        for &(backward, s, e) in spans {
            let (a, b) = (px(s), px(e));
            c.rect(a, y + 1, (b - a).max(1), row_h - 2, if backward { BACKWARD } else { FORWARD });
        }
        c.rect(px(makespan), y + 1, px(total) - px(makespan), row_h - 2, AFTER);
    }
    let base = TOP + stages * row_h;
    c.rect(LABEL_W, base + 2, PLOT_W, 1, AXIS);
    c.text(LABEL_W, base + 10, "0", TEXT);
    let end = super::search::seconds(total);
    c.text(LABEL_W + PLOT_W - 8 * end.len() as i64, base + 10, &end, TEXT);
    let mut x = LABEL_W;
    for (name, color) in
        [("forward", FORWARD), ("backward", BACKWARD), ("bubble", IDLE), ("dp reduction + optimizer", AFTER)]
    {
        c.rect(x, base + 28, 12, 12, color);
        c.text(x + 16, base + 29, name, TEXT);
        x += 16 + 8 * name.len() as i64 + 24;
    }
    Ok(c)
}

//! A training progress bar (step, loss, tokens/s, ETA) on a terminal, and plain log lines when
//! stderr is not one (a log file, CI).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

enum Output {
    Bar(ProgressBar),
    /// Plain lines to a sink (stderr by default).
    Lines(Box<dyn Write + Send>),
}

/// Training progress: a bar on a terminal, a log line every few steps elsewhere.
pub struct Progress {
    output: Output,
    start_step: u64,
    total_steps: u64,
    started: Instant,
    plain_every: u64,
}

impl Progress {
    /// Progress of a run from `start_step` (0, or the step it resumed at) to `total_steps`,
    /// drawn as a bar when stderr is a terminal.
    pub fn new(start_step: u64, total_steps: u64) -> Self {
        let output = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total_steps), ProgressDrawTarget::stderr_with_hz(4));
            bar.set_style(
                ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} {msg}")
                    .expect("the template is valid")
                    .progress_chars("=> "),
            );
            bar.set_position(start_step);
            bar.reset_eta();
            Output::Bar(bar)
        } else {
            Output::Lines(Box::new(std::io::stderr()))
        };
        Self::with_output(output, start_step, total_steps)
    }

    /// Plain lines to `sink`, whatever stderr is.
    pub fn to_writer(sink: Box<dyn Write + Send>, start_step: u64, total_steps: u64) -> Self {
        Self::with_output(Output::Lines(sink), start_step, total_steps)
    }

    fn with_output(output: Output, start_step: u64, total_steps: u64) -> Self {
        Self { output, start_step, total_steps, started: Instant::now(), plain_every: 1 }
    }

    /// In plain mode, prints every `n`-th step (and the last) instead of every step.
    pub fn with_plain_every(mut self, n: u64) -> Self {
        self.plain_every = n.max(1);
        self
    }

    /// Reports that `step` (1-based: steps done) finished with `loss` at `tokens_per_s`.
    pub fn update(&mut self, step: u64, loss: f32, tokens_per_s: f64) {
        self.update_with(step, loss, tokens_per_s, "");
    }

    /// [`update`](Self::update) with `extra` after the loss (fp16: the loss scale and the
    /// steps skipped).
    pub fn update_with(&mut self, step: u64, loss: f32, tokens_per_s: f64, extra: &str) {
        let eta = eta(
            self.started.elapsed(),
            step.saturating_sub(self.start_step),
            self.total_steps.saturating_sub(step),
        );
        let stats =
            format!("loss {loss:.4}{extra} | {} | eta {}", format_rate(tokens_per_s), format_duration(eta));
        match &mut self.output {
            Output::Bar(bar) => {
                bar.set_position(step);
                bar.set_message(stats);
            }
            Output::Lines(sink) => {
                if step % self.plain_every == 0 || step >= self.total_steps {
                    let _ = writeln!(
                        sink,
                        "step {step:>width$}/{} | {stats}",
                        self.total_steps,
                        width = digits(self.total_steps)
                    );
                }
            }
        }
    }

    /// Prints a line (an evaluation, a checkpoint) without breaking the bar.
    pub fn println(&mut self, msg: &str) {
        match &mut self.output {
            Output::Bar(bar) => bar.println(msg),
            Output::Lines(sink) => {
                let _ = writeln!(sink, "{msg}");
            }
        }
    }

    /// Ends the bar (leaving its last state on screen); nothing to do for plain lines.
    pub fn finish(&mut self) {
        match &mut self.output {
            Output::Bar(bar) => bar.finish(),
            Output::Lines(sink) => {
                let _ = sink.flush();
            }
        }
    }
}

fn digits(n: u64) -> usize {
    n.to_string().len()
}

/// Time left, extrapolating the average time per step so far.
fn eta(elapsed: Duration, steps_done: u64, steps_left: u64) -> Option<Duration> {
    (steps_done > 0).then(|| elapsed.mul_f64(steps_left as f64 / steps_done as f64))
}

fn format_duration(d: Option<Duration>) -> String {
    let Some(d) = d else { return "?".into() };
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

fn format_rate(tokens_per_s: f64) -> String {
    if tokens_per_s >= 1e6 {
        format!("{:.2}M tok/s", tokens_per_s / 1e6)
    } else if tokens_per_s >= 1e3 {
        format!("{:.1}k tok/s", tokens_per_s / 1e3)
    } else {
        format!("{tokens_per_s:.0} tok/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn plain_mode_prints_every_nth_and_the_last_step() {
        let sink = Shared::default();
        let mut p = Progress::to_writer(Box::new(sink.clone()), 0, 25).with_plain_every(10);
        for step in 1..=25 {
            p.update(step, 3.0 / step as f32, 12_345.0);
        }
        p.println("val loss 1.0");
        p.finish();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("step 10/25 | loss 0.3000 | 12.3k tok/s | eta "), "{}", lines[0]);
        assert!(lines[2].starts_with("step 25/25"));
        assert!(lines[2].ends_with("eta 0s"), "{}", lines[2]);
        assert_eq!(lines[3], "val loss 1.0");
    }

    #[test]
    fn eta_and_formats() {
        assert_eq!(eta(Duration::from_secs(10), 0, 5), None);
        assert_eq!(eta(Duration::from_secs(10), 20, 50), Some(Duration::from_secs(25)));
        assert_eq!(format_duration(None), "?");
        assert_eq!(format_duration(Some(Duration::from_secs(59))), "59s");
        assert_eq!(format_duration(Some(Duration::from_secs(125))), "2m05s");
        assert_eq!(format_duration(Some(Duration::from_secs(7322))), "2h02m");
        assert_eq!(format_rate(2_500_000.0), "2.50M tok/s");
        assert_eq!(format_rate(999.4), "999 tok/s");
    }
}

//! A spinner with the elapsed time while a remote summarizer works, on a terminal only.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Spinner {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    /// Starts one when stderr is a terminal and `wanted`; otherwise a spinner that shows nothing.
    pub fn start(wanted: bool, what: &str) -> Spinner {
        let done = Arc::new(AtomicBool::new(false));
        if !wanted || !std::io::stderr().is_terminal() {
            return Spinner { done, thread: None };
        }
        let flag = done.clone();
        let what = what.to_owned();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let mut frame = 0;
            while !flag.load(Ordering::Relaxed) {
                eprint!(
                    "\r{} {what} {:.1}s",
                    frames[frame % frames.len()],
                    started.elapsed().as_secs_f64()
                );
                let _ = std::io::stderr().flush();
                frame += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            eprint!("\r\x1b[2K");
        });
        Spinner {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
